CREATE TABLE "provider_connections" (
	"id" text PRIMARY KEY NOT NULL,
	"org_id" text NOT NULL,
	"kind" text NOT NULL,
	"name" text NOT NULL,
	"name_key" text NOT NULL,
	"secret_sealed" text NOT NULL,
	"fallback_secrets_sealed" text,
	"fallback_secret_count" integer DEFAULT 0 NOT NULL,
	"environments" text[] DEFAULT '{}' NOT NULL,
	"config" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"model_map" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"timeout_ms" integer,
	"alternate_base_urls" text[] DEFAULT '{}' NOT NULL,
	"pool_role" text DEFAULT 'active' NOT NULL,
	"status" text DEFAULT 'enabled' NOT NULL,
	"credential_updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	"deleted_at" timestamp with time zone,
	"version" integer DEFAULT 1 NOT NULL,
	"managed_by" text DEFAULT 'api' NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "routes" (
	"id" text PRIMARY KEY NOT NULL,
	"org_id" text NOT NULL,
	"slug" text NOT NULL,
	"name" text,
	"description" text,
	"strategy" text DEFAULT 'priority' NOT NULL,
	"environments" text[] DEFAULT '{}' NOT NULL,
	"timeout_ms" integer,
	"max_retries" integer DEFAULT 1 NOT NULL,
	"targets" jsonb NOT NULL,
	"rules" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"failover" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"deleted_at" timestamp with time zone,
	"version" integer DEFAULT 1 NOT NULL,
	"managed_by" text DEFAULT 'api' NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "member_budgets" (
	"id" text PRIMARY KEY NOT NULL,
	"org_id" text NOT NULL,
	"spend_limit" jsonb,
	"version" integer DEFAULT 1 NOT NULL,
	"managed_by" text DEFAULT 'api' NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "org_settings" (
	"id" text PRIMARY KEY NOT NULL,
	"org_id" text NOT NULL,
	"monthly_target" numeric,
	"hard_cap" jsonb,
	"unpriced_budget_policy" text DEFAULT 'block' NOT NULL,
	"prompt_logging_enabled" boolean DEFAULT false NOT NULL,
	"prompt_logging_retention_days" integer DEFAULT 30 NOT NULL,
	"model_allowlist" text[] DEFAULT '{}' NOT NULL,
	"billing_day_of_month" integer DEFAULT 1 NOT NULL,
	"version" integer DEFAULT 1 NOT NULL,
	"managed_by" text DEFAULT 'api' NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "model_prices" (
	"id" text PRIMARY KEY NOT NULL,
	"org_id" text NOT NULL,
	"model" text NOT NULL,
	"provider" text,
	"input_per_million" numeric,
	"output_per_million" numeric,
	"cached_input_per_million" numeric,
	"unit" numeric,
	"note" text,
	"version" integer DEFAULT 1 NOT NULL,
	"managed_by" text DEFAULT 'api' NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "webhook_endpoints" (
	"id" text PRIMARY KEY NOT NULL,
	"org_id" text NOT NULL,
	"url" text NOT NULL,
	"description" text,
	"events" text[] NOT NULL,
	"secret_sealed" text NOT NULL,
	"retired_secrets" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"secret_rotated_at" timestamp with time zone,
	"deleted_at" timestamp with time zone,
	"version" integer DEFAULT 1 NOT NULL,
	"managed_by" text DEFAULT 'api' NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "provider_connections" ADD CONSTRAINT "provider_connections_org_id_organizations_id_fk" FOREIGN KEY ("org_id") REFERENCES "public"."organizations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "routes" ADD CONSTRAINT "routes_org_id_organizations_id_fk" FOREIGN KEY ("org_id") REFERENCES "public"."organizations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "member_budgets" ADD CONSTRAINT "member_budgets_id_members_id_fk" FOREIGN KEY ("id") REFERENCES "public"."members"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "member_budgets" ADD CONSTRAINT "member_budgets_org_id_organizations_id_fk" FOREIGN KEY ("org_id") REFERENCES "public"."organizations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "org_settings" ADD CONSTRAINT "org_settings_id_organizations_id_fk" FOREIGN KEY ("id") REFERENCES "public"."organizations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "org_settings" ADD CONSTRAINT "org_settings_org_id_organizations_id_fk" FOREIGN KEY ("org_id") REFERENCES "public"."organizations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "model_prices" ADD CONSTRAINT "model_prices_org_id_organizations_id_fk" FOREIGN KEY ("org_id") REFERENCES "public"."organizations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "webhook_endpoints" ADD CONSTRAINT "webhook_endpoints_org_id_organizations_id_fk" FOREIGN KEY ("org_id") REFERENCES "public"."organizations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "provider_connections_org_kind_name" ON "provider_connections" USING btree ("org_id","kind","name_key") WHERE "provider_connections"."deleted_at" is null;--> statement-breakpoint
CREATE INDEX "provider_connections_org" ON "provider_connections" USING btree ("org_id");--> statement-breakpoint
CREATE UNIQUE INDEX "routes_org_slug" ON "routes" USING btree ("org_id","slug") WHERE "routes"."deleted_at" is null;--> statement-breakpoint
CREATE UNIQUE INDEX "model_prices_org_model_provider" ON "model_prices" USING btree ("org_id","model",coalesce("provider", ''));--> statement-breakpoint
CREATE INDEX "webhook_endpoints_org" ON "webhook_endpoints" USING btree ("org_id");--> statement-breakpoint
CREATE UNIQUE INDEX "gateway_keys_rotated_from" ON "gateway_keys" USING btree ("rotated_from_key_id");