CREATE TABLE "usage_hourly_cost_centers" (
	"org_id" text NOT NULL,
	"hour" timestamp with time zone NOT NULL,
	"key_id" text NOT NULL,
	"project_id" text NOT NULL,
	"model" text DEFAULT '' NOT NULL,
	"provider" text DEFAULT '' NOT NULL,
	"user_id" text DEFAULT '' NOT NULL,
	"tags" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"cost_center_id" text DEFAULT '' NOT NULL,
	"requests" integer DEFAULT 0 NOT NULL,
	"prompt_tokens" bigint DEFAULT 0 NOT NULL,
	"completion_tokens" bigint DEFAULT 0 NOT NULL,
	"total_tokens" bigint DEFAULT 0 NOT NULL,
	"cost" numeric DEFAULT 0 NOT NULL,
	"unpriced_requests" integer DEFAULT 0 NOT NULL,
	CONSTRAINT "usage_hourly_cost_centers_pk" PRIMARY KEY("org_id","hour","key_id","project_id","model","provider","user_id","tags","cost_center_id")
);
--> statement-breakpoint
ALTER TABLE "request_logs" ADD COLUMN "cost_rule_id" text;--> statement-breakpoint
ALTER TABLE "request_logs" ADD COLUMN "cost_rule_version_id" text;--> statement-breakpoint
ALTER TABLE "request_logs" ADD COLUMN "cost_allocation" jsonb;--> statement-breakpoint
ALTER TABLE "jobs" ADD COLUMN "cost_rule_id" text;--> statement-breakpoint
ALTER TABLE "jobs" ADD COLUMN "cost_rule_version_id" text;--> statement-breakpoint
ALTER TABLE "jobs" ADD COLUMN "cost_allocation" jsonb;--> statement-breakpoint
ALTER TABLE "usage_hourly_cost_centers" ADD CONSTRAINT "usage_hourly_cost_centers_org_id_organizations_id_fk" FOREIGN KEY ("org_id") REFERENCES "public"."organizations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "cost_center_rule_versions_org_effective" ON "cost_center_rule_versions" USING btree ("org_id","rule_id","effective_at");