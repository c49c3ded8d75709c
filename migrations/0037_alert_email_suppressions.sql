CREATE TABLE "email_suppressions" (
	"org_id" text NOT NULL,
	"address" text NOT NULL,
	"channel_id" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "email_suppressions_org_id_address_pk" PRIMARY KEY("org_id","address")
);
--> statement-breakpoint
ALTER TABLE "notification_sends" ADD COLUMN "state" text DEFAULT 'sent' NOT NULL;--> statement-breakpoint
ALTER TABLE "email_suppressions" ADD CONSTRAINT "email_suppressions_org_id_organizations_id_fk" FOREIGN KEY ("org_id") REFERENCES "public"."organizations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
-- A channel's unsubscribed addresses become their organization's, as the mailbox
-- (core/notifications/suppressions.ts suppressionAddress: lower case, no +tag).
INSERT INTO "email_suppressions" ("org_id", "address", "channel_id")
SELECT c."org_id", regexp_replace(lower(trim(u.email)), '^([^@+]+)\+[^@]*@', '\1@'), c."id"
FROM "notification_channels" c CROSS JOIN LATERAL unnest(c."unsubscribed_emails") AS u(email)
ON CONFLICT DO NOTHING;