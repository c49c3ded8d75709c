ALTER TABLE "idempotency_records" ADD COLUMN "claim_token" text;--> statement-breakpoint
ALTER TABLE "idempotency_records" ADD COLUMN "checkpoint" jsonb;