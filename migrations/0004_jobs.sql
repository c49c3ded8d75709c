CREATE TABLE "job_events" (
	"id" text PRIMARY KEY NOT NULL,
	"org_id" text NOT NULL,
	"job_id" text NOT NULL,
	"type" text NOT NULL,
	"data" jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "jobs" (
	"id" text PRIMARY KEY NOT NULL,
	"org_id" text NOT NULL,
	"key_id" text NOT NULL,
	"lineage_id" text NOT NULL,
	"project_id" text NOT NULL,
	"type" text NOT NULL,
	"status" text DEFAULT 'queued' NOT NULL,
	"model" text NOT NULL,
	"route_slug" text,
	"route" text,
	"provider" text,
	"connection_id" text,
	"provider_job_id" text,
	"progress" real DEFAULT 0 NOT NULL,
	"request" jsonb NOT NULL,
	"webhook" jsonb,
	"output" jsonb,
	"usage" jsonb,
	"error" jsonb,
	"status_checks" integer DEFAULT 0 NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"started_at" timestamp with time zone,
	"completed_at" timestamp with time zone,
	"expires_at" timestamp with time zone,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "job_events" ADD CONSTRAINT "job_events_org_id_organizations_id_fk" FOREIGN KEY ("org_id") REFERENCES "public"."organizations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "job_events" ADD CONSTRAINT "job_events_job_id_jobs_id_fk" FOREIGN KEY ("job_id") REFERENCES "public"."jobs"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "jobs" ADD CONSTRAINT "jobs_org_id_organizations_id_fk" FOREIGN KEY ("org_id") REFERENCES "public"."organizations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "job_events_job" ON "job_events" USING btree ("job_id");--> statement-breakpoint
CREATE INDEX "jobs_org_id" ON "jobs" USING btree ("org_id","id");--> statement-breakpoint
CREATE INDEX "jobs_lineage_id" ON "jobs" USING btree ("lineage_id","id");--> statement-breakpoint
CREATE INDEX "jobs_project_id" ON "jobs" USING btree ("project_id","id");