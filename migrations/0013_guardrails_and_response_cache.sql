ALTER TABLE "projects" ADD COLUMN "guardrail_policy" jsonb;--> statement-breakpoint
ALTER TABLE "gateway_keys" ADD COLUMN "guardrail_policy" jsonb;--> statement-breakpoint
ALTER TABLE "org_settings" ADD COLUMN "response_cache" jsonb DEFAULT '{"enabled":false,"default_ttl_seconds":3600}'::jsonb NOT NULL;--> statement-breakpoint
ALTER TABLE "org_settings" ADD COLUMN "guardrail_policy" jsonb;--> statement-breakpoint
ALTER TABLE "request_logs" ADD COLUMN "cache_status" text;--> statement-breakpoint
ALTER TABLE "request_logs" ADD COLUMN "cache_source_request_id" text;--> statement-breakpoint
ALTER TABLE "request_logs" ADD COLUMN "guardrails" jsonb;