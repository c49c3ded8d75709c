ALTER TABLE "spend_ledger" ADD COLUMN "provider" text;--> statement-breakpoint
ALTER TABLE "spend_ledger" ADD COLUMN "model" text;--> statement-breakpoint
-- Rows settled before these columns: what served them, from the request log and the jobs.
UPDATE "spend_ledger" l SET "provider" = r."provider", "model" = r."served_model" FROM "request_logs" r WHERE l."request_id" = r."id" AND l."org_id" = r."org_id" AND l."provider" IS NULL;--> statement-breakpoint
UPDATE "spend_ledger" l SET "provider" = j."provider", "model" = j."model" FROM "jobs" j WHERE l."job_id" = j."id" AND l."provider" IS NULL;
