CREATE TABLE "usage_hourly" (
	"org_id" text NOT NULL,
	"hour" timestamp with time zone NOT NULL,
	"key_id" text NOT NULL,
	"project_id" text NOT NULL,
	"model" text DEFAULT '' NOT NULL,
	"provider" text DEFAULT '' NOT NULL,
	"user_id" text DEFAULT '' NOT NULL,
	"tags" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"requests" integer DEFAULT 0 NOT NULL,
	"prompt_tokens" bigint DEFAULT 0 NOT NULL,
	"completion_tokens" bigint DEFAULT 0 NOT NULL,
	"total_tokens" bigint DEFAULT 0 NOT NULL,
	"cost" numeric DEFAULT 0 NOT NULL,
	"unpriced_requests" integer DEFAULT 0 NOT NULL,
	CONSTRAINT "usage_hourly_pk" PRIMARY KEY("org_id","hour","key_id","project_id","model","provider","user_id","tags")
);
--> statement-breakpoint
ALTER TABLE "usage_hourly" ADD CONSTRAINT "usage_hourly_org_id_organizations_id_fk" FOREIGN KEY ("org_id") REFERENCES "public"."organizations"("id") ON DELETE cascade ON UPDATE no action;