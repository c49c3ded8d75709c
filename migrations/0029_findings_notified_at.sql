ALTER TABLE "findings" ADD COLUMN "notified_at" timestamp with time zone;--> statement-breakpoint
CREATE INDEX "findings_notified" ON "findings" USING btree ("org_id","fingerprint","notified_at");