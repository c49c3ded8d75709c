-- request_logs becomes a table partitioned by RANGE (created_at), one partition a UTC day named
-- request_logs_pYYYYMMDD, plus a default partition as a safety net. The retention schedule
-- (workflows/request-log-retention.ts) makes days ahead and drops days past the longest history
-- window. The primary key must hold the partition key: (id, created_at).
DROP INDEX IF EXISTS "request_logs_org_created";--> statement-breakpoint
DROP INDEX IF EXISTS "request_logs_org_user";--> statement-breakpoint
DROP INDEX IF EXISTS "request_logs_project";--> statement-breakpoint
ALTER TABLE "request_logs" DROP CONSTRAINT IF EXISTS "request_logs_pkey";--> statement-breakpoint
ALTER TABLE "request_logs" DROP CONSTRAINT IF EXISTS "request_logs_org_id_organizations_id_fk";--> statement-breakpoint
ALTER TABLE "request_logs" RENAME TO "request_logs_unpartitioned";--> statement-breakpoint
CREATE TABLE "request_logs" (
	"id" text NOT NULL,
	"org_id" text NOT NULL,
	"key_id" text NOT NULL,
	"project_id" text NOT NULL,
	"endpoint" text NOT NULL,
	"requested_model" text,
	"route_slug" text,
	"served_model" text,
	"provider" text,
	"connection_id" text,
	"chain_position" text,
	"status" integer NOT NULL,
	"error_type" text,
	"error_code" text,
	"stream" boolean DEFAULT false NOT NULL,
	"latency_ms" integer NOT NULL,
	"attempts" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"usage" jsonb,
	"cost" numeric,
	"price_source" text,
	"user_id" text,
	"session_id" text,
	"tags" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"params_dropped" text[] DEFAULT '{}' NOT NULL,
	"cache_status" text,
	"cache_source_request_id" text,
	"guardrails" jsonb,
	"request_body" jsonb,
	"response_body" jsonb,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "request_logs_pk" PRIMARY KEY("id","created_at")
) PARTITION BY RANGE ("created_at");--> statement-breakpoint
CREATE TABLE "request_logs_default" PARTITION OF "request_logs" DEFAULT;--> statement-breakpoint
-- One partition a day from the oldest existing row (or today) to 7 days ahead
-- (REQUEST_LOG_PARTITIONS_AHEAD_DAYS), so that no existing row lands in the default partition.
DO $$
DECLARE
	first_day date := least((SELECT min("created_at" AT TIME ZONE 'UTC')::date FROM "request_logs_unpartitioned"), (now() AT TIME ZONE 'UTC')::date);
	last_day date := (now() AT TIME ZONE 'UTC')::date + 7;
	day date;
BEGIN
	day := first_day;
	WHILE day <= last_day LOOP
		EXECUTE format(
			'CREATE TABLE %I PARTITION OF "request_logs" FOR VALUES FROM (%L) TO (%L)',
			'request_logs_p' || to_char(day, 'YYYYMMDD'),
			day::timestamp AT TIME ZONE 'UTC',
			(day + 1)::timestamp AT TIME ZONE 'UTC'
		);
		day := day + 1;
	END LOOP;
END $$;--> statement-breakpoint
INSERT INTO "request_logs" ("id","org_id","key_id","project_id","endpoint","requested_model","route_slug","served_model","provider","connection_id","chain_position","status","error_type","error_code","stream","latency_ms","attempts","usage","cost","price_source","user_id","session_id","tags","params_dropped","cache_status","cache_source_request_id","guardrails","request_body","response_body","created_at")
SELECT "id","org_id","key_id","project_id","endpoint","requested_model","route_slug","served_model","provider","connection_id","chain_position","status","error_type","error_code","stream","latency_ms","attempts","usage","cost","price_source","user_id","session_id","tags","params_dropped","cache_status","cache_source_request_id","guardrails","request_body","response_body","created_at"
FROM "request_logs_unpartitioned";--> statement-breakpoint
DROP TABLE "request_logs_unpartitioned";--> statement-breakpoint
ALTER TABLE "request_logs" ADD CONSTRAINT "request_logs_org_id_organizations_id_fk" FOREIGN KEY ("org_id") REFERENCES "public"."organizations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "request_logs_org_created" ON "request_logs" USING btree ("org_id","created_at","id");--> statement-breakpoint
CREATE INDEX "request_logs_org_key" ON "request_logs" USING btree ("org_id","key_id","created_at");--> statement-breakpoint
CREATE INDEX "request_logs_org_user" ON "request_logs" USING btree ("org_id","user_id","created_at") WHERE "request_logs"."user_id" is not null;--> statement-breakpoint
CREATE INDEX "request_logs_org_session" ON "request_logs" USING btree ("org_id","session_id","created_at") WHERE "request_logs"."session_id" is not null;--> statement-breakpoint
CREATE INDEX "request_logs_org_model" ON "request_logs" USING btree ("org_id","requested_model","created_at");--> statement-breakpoint
CREATE INDEX "request_logs_org_status" ON "request_logs" USING btree ("org_id","status","created_at");--> statement-breakpoint
CREATE INDEX "request_logs_project" ON "request_logs" USING btree ("project_id");--> statement-breakpoint
CREATE INDEX "request_logs_bodies" ON "request_logs" USING btree ("org_id","created_at") WHERE "request_logs"."request_body" is not null or "request_logs"."response_body" is not null;
