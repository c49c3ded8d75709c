ALTER TABLE "provider_connections" ALTER COLUMN "secret_sealed" DROP NOT NULL;--> statement-breakpoint
ALTER TABLE "audit_events" ADD COLUMN "project_id" text;--> statement-breakpoint
CREATE INDEX "audit_events_org_project_created" ON "audit_events" USING btree ("org_id","project_id","created_at");--> statement-breakpoint
-- Earlier writes get the project they concern, so a project-restricted token keeps its history
-- (the same rule the resource framework applies to new rows: projectOf of the written row).
UPDATE "audit_events" SET "project_id" = "resource_id" WHERE "resource_type" = 'projects';--> statement-breakpoint
UPDATE "audit_events" a SET "project_id" = k."project_id" FROM "gateway_keys" k WHERE a."resource_type" = 'gateway_keys' AND k."id" = a."resource_id";--> statement-breakpoint
UPDATE "audit_events" a SET "project_id" = r."project_id" FROM "end_user_cap_rules" r WHERE a."resource_type" = 'end_user_cap_rules' AND r."id" = a."resource_id";--> statement-breakpoint
UPDATE "audit_events" a SET "project_id" = r."project_id" FROM "end_user_cap_rules" r WHERE a."resource_type" = 'end_user_cap_overrides' AND r."id" = split_part(a."resource_id", '/', 1);--> statement-breakpoint
UPDATE "audit_events" SET "project_id" = substr("resource_id", 9) WHERE "resource_type" = 'guardrail_policies' AND "resource_id" LIKE 'project:%';--> statement-breakpoint
UPDATE "audit_events" a SET "project_id" = k."project_id" FROM "gateway_keys" k WHERE a."resource_type" = 'guardrail_policies' AND a."resource_id" = 'key:' || k."id";--> statement-breakpoint
UPDATE "audit_events" a SET "project_id" = g."project_id" FROM "mcp_key_grants" g WHERE a."resource_type" = 'mcp_key_grants' AND g."id" = a."resource_id";
