CREATE TABLE "end_user_cap_overrides" (
	"rule_id" text NOT NULL,
	"end_user_id" text NOT NULL,
	"amount" numeric NOT NULL,
	"version" integer DEFAULT 1 NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "end_user_cap_overrides_rule_id_end_user_id_pk" PRIMARY KEY("rule_id","end_user_id")
);
--> statement-breakpoint
CREATE TABLE "end_user_cap_rules" (
	"id" text PRIMARY KEY NOT NULL,
	"org_id" text NOT NULL,
	"project_id" text,
	"amount" numeric,
	"period" text NOT NULL,
	"behavior" text NOT NULL,
	"missing_id" text NOT NULL,
	"enabled" boolean DEFAULT true NOT NULL,
	"version" integer DEFAULT 1 NOT NULL,
	"managed_by" text DEFAULT 'api' NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "end_user_cap_overrides" ADD CONSTRAINT "end_user_cap_overrides_rule_id_end_user_cap_rules_id_fk" FOREIGN KEY ("rule_id") REFERENCES "public"."end_user_cap_rules"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "end_user_cap_rules" ADD CONSTRAINT "end_user_cap_rules_org_id_organizations_id_fk" FOREIGN KEY ("org_id") REFERENCES "public"."organizations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "end_user_cap_rules" ADD CONSTRAINT "end_user_cap_rules_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "end_user_cap_rules_org_wide" ON "end_user_cap_rules" USING btree ("org_id") WHERE "end_user_cap_rules"."project_id" is null;--> statement-breakpoint
CREATE UNIQUE INDEX "end_user_cap_rules_project" ON "end_user_cap_rules" USING btree ("project_id") WHERE "end_user_cap_rules"."project_id" is not null;