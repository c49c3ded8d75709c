CREATE TABLE "stored_responses" (
	"id" text PRIMARY KEY NOT NULL,
	"org_id" text NOT NULL,
	"key_id" text NOT NULL,
	"lineage_id" text NOT NULL,
	"input" jsonb NOT NULL,
	"response" jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "stored_responses" ADD CONSTRAINT "stored_responses_org_id_organizations_id_fk" FOREIGN KEY ("org_id") REFERENCES "public"."organizations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "stored_responses_org_created" ON "stored_responses" USING btree ("org_id","created_at");