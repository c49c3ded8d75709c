ALTER TABLE "stored_responses" ADD COLUMN "previous_id" text;--> statement-breakpoint
-- Rows kept before one row a turn hold their whole conversation expanded in "input": each reads,
-- and is continued, as a conversation's first turn of its own size.
ALTER TABLE "stored_responses" ADD COLUMN "depth" integer DEFAULT 1 NOT NULL;--> statement-breakpoint
ALTER TABLE "stored_responses" ALTER COLUMN "depth" DROP DEFAULT;--> statement-breakpoint
ALTER TABLE "stored_responses" ADD COLUMN "conversation_bytes" bigint DEFAULT 0 NOT NULL;--> statement-breakpoint
UPDATE "stored_responses" SET "conversation_bytes" = octet_length("input"::text) + octet_length("response"::text);--> statement-breakpoint
ALTER TABLE "stored_responses" ALTER COLUMN "conversation_bytes" DROP DEFAULT;
