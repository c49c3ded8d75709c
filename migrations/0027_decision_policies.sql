CREATE TABLE "decision_policies" (
	"id" text PRIMARY KEY NOT NULL,
	"org_id" text NOT NULL,
	"slug" text NOT NULL,
	"name" text NOT NULL,
	"description" text,
	"enabled" boolean DEFAULT true NOT NULL,
	"model" text NOT NULL,
	"instructions" text DEFAULT '' NOT NULL,
	"output_schema" jsonb NOT NULL,
	"deadline_ms" integer NOT NULL,
	"fallback" jsonb,
	"project_ids" text[] DEFAULT '{}' NOT NULL,
	"max_tokens" integer,
	"version" integer DEFAULT 1 NOT NULL,
	"managed_by" text DEFAULT 'api' NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "request_logs" ADD COLUMN "decision_id" text;--> statement-breakpoint
ALTER TABLE "decision_policies" ADD CONSTRAINT "decision_policies_org_id_organizations_id_fk" FOREIGN KEY ("org_id") REFERENCES "public"."organizations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "decision_policies_org_slug" ON "decision_policies" USING btree ("org_id","slug");--> statement-breakpoint
CREATE INDEX "decision_policies_org_created" ON "decision_policies" USING btree ("org_id","created_at","id");