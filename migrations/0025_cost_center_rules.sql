CREATE TABLE "cost_center_rule_versions" (
	"id" text PRIMARY KEY NOT NULL,
	"rule_id" text NOT NULL,
	"org_id" text NOT NULL,
	"version" integer NOT NULL,
	"match" jsonb NOT NULL,
	"priority" integer NOT NULL,
	"note" text,
	"cost_center_id" text,
	"allocation" jsonb,
	"ended" boolean DEFAULT false NOT NULL,
	"effective_at" timestamp with time zone NOT NULL,
	"actor_token_id" text
);
--> statement-breakpoint
CREATE TABLE "cost_center_rules" (
	"id" text PRIMARY KEY NOT NULL,
	"org_id" text NOT NULL,
	"version_id" text NOT NULL,
	"match" jsonb NOT NULL,
	"priority" integer NOT NULL,
	"note" text,
	"cost_center_id" text,
	"allocation" jsonb,
	"ended_at" timestamp with time zone,
	"version" integer DEFAULT 1 NOT NULL,
	"managed_by" text DEFAULT 'api' NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "cost_center_rule_versions" ADD CONSTRAINT "cost_center_rule_versions_rule_id_cost_center_rules_id_fk" FOREIGN KEY ("rule_id") REFERENCES "public"."cost_center_rules"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "cost_center_rule_versions" ADD CONSTRAINT "cost_center_rule_versions_org_id_organizations_id_fk" FOREIGN KEY ("org_id") REFERENCES "public"."organizations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "cost_center_rules" ADD CONSTRAINT "cost_center_rules_org_id_organizations_id_fk" FOREIGN KEY ("org_id") REFERENCES "public"."organizations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "cost_center_rule_versions_rule_version" ON "cost_center_rule_versions" USING btree ("rule_id","version");--> statement-breakpoint
CREATE INDEX "cost_center_rules_org_priority" ON "cost_center_rules" USING btree ("org_id","priority");