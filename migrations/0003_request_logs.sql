CREATE TABLE "request_logs" (
	"id" text PRIMARY KEY NOT NULL,
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
	"request_body" jsonb,
	"response_body" jsonb,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "request_logs" ADD CONSTRAINT "request_logs_org_id_organizations_id_fk" FOREIGN KEY ("org_id") REFERENCES "public"."organizations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "request_logs_org_created" ON "request_logs" USING btree ("org_id","created_at");--> statement-breakpoint
CREATE INDEX "request_logs_project" ON "request_logs" USING btree ("project_id");--> statement-breakpoint
CREATE INDEX "request_logs_org_user" ON "request_logs" USING btree ("org_id","user_id");