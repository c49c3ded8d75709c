ALTER TABLE "spend_ledger" ADD COLUMN "request_id" text;--> statement-breakpoint
ALTER TABLE "spend_ledger" ADD COLUMN "member_id" text;--> statement-breakpoint
ALTER TABLE "spend_ledger" ADD COLUMN "end_user_id" text;--> statement-breakpoint
CREATE INDEX "spend_ledger_org" ON "spend_ledger" USING btree ("org_id","created_at");--> statement-breakpoint
CREATE INDEX "spend_ledger_project" ON "spend_ledger" USING btree ("project_id","created_at");