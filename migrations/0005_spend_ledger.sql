CREATE TABLE "spend_ledger" (
	"id" text PRIMARY KEY NOT NULL,
	"org_id" text NOT NULL,
	"lineage_id" text NOT NULL,
	"project_id" text NOT NULL,
	"job_id" text,
	"amount" numeric NOT NULL,
	"state" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "spend_ledger" ADD CONSTRAINT "spend_ledger_org_id_organizations_id_fk" FOREIGN KEY ("org_id") REFERENCES "public"."organizations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "spend_ledger_lineage" ON "spend_ledger" USING btree ("lineage_id","created_at");--> statement-breakpoint
CREATE UNIQUE INDEX "spend_ledger_job" ON "spend_ledger" USING btree ("job_id");