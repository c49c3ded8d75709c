CREATE TABLE "notification_sends" (
	"id" text PRIMARY KEY NOT NULL,
	"org_id" text NOT NULL,
	"channel_id" text NOT NULL,
	"delivery_id" text,
	"recipient" text NOT NULL,
	"sent_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
ALTER TABLE "notification_channels" ADD COLUMN "unsubscribed_emails" text[] DEFAULT '{}' NOT NULL;--> statement-breakpoint
ALTER TABLE "notification_channels" ADD COLUMN "consecutive_refusals" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "notification_sends" ADD CONSTRAINT "notification_sends_org_id_organizations_id_fk" FOREIGN KEY ("org_id") REFERENCES "public"."organizations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "notification_sends_recipient" ON "notification_sends" USING btree ("recipient","sent_at");--> statement-breakpoint
CREATE INDEX "notification_sends_channel" ON "notification_sends" USING btree ("channel_id","sent_at");--> statement-breakpoint
CREATE INDEX "notification_sends_delivery" ON "notification_sends" USING btree ("delivery_id");