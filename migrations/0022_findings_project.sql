ALTER TABLE "findings" ADD COLUMN "project_id" text;--> statement-breakpoint
CREATE INDEX "findings_org_project" ON "findings" USING btree ("org_id","project_id");