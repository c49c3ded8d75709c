CREATE TABLE "mcp_key_grants" (
	"id" text PRIMARY KEY NOT NULL,
	"org_id" text NOT NULL,
	"key_lineage_id" text NOT NULL,
	"key_id" text NOT NULL,
	"project_id" text NOT NULL,
	"server_id" text NOT NULL,
	"mode" text NOT NULL,
	"tools" text[] DEFAULT '{}' NOT NULL,
	"trifecta_confirmed" boolean DEFAULT false NOT NULL,
	"version" integer DEFAULT 1 NOT NULL,
	"managed_by" text DEFAULT 'api' NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "mcp_server_tools" (
	"id" text PRIMARY KEY NOT NULL,
	"org_id" text NOT NULL,
	"server_id" text NOT NULL,
	"upstream_name" text NOT NULL,
	"exposed_name" text,
	"state" text DEFAULT 'pending' NOT NULL,
	"access_class" text,
	"suggested_class" text NOT NULL,
	"definition" jsonb NOT NULL,
	"definition_sha256" text NOT NULL,
	"approved_definition" jsonb,
	"approved_sha256" text,
	"scan_findings" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"listed" boolean DEFAULT true NOT NULL,
	"first_seen_at" timestamp with time zone DEFAULT now() NOT NULL,
	"changed_at" timestamp with time zone,
	"approved_at" timestamp with time zone,
	"blocked_at" timestamp with time zone,
	"removed_at" timestamp with time zone,
	"version" integer DEFAULT 1 NOT NULL,
	"managed_by" text DEFAULT 'api' NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "mcp_servers" (
	"id" text PRIMARY KEY NOT NULL,
	"org_id" text NOT NULL,
	"slug" text NOT NULL,
	"name" text NOT NULL,
	"url" text NOT NULL,
	"auth_type" text DEFAULT 'none' NOT NULL,
	"header_names" text[] DEFAULT '{}' NOT NULL,
	"credential_sealed" text,
	"credential_updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	"project_ids" text[] DEFAULT '{}' NOT NULL,
	"environments" text[] DEFAULT '{}' NOT NULL,
	"reads_private_data" boolean DEFAULT false NOT NULL,
	"reads_untrusted_content" boolean DEFAULT false NOT NULL,
	"can_send_data_out" boolean DEFAULT false NOT NULL,
	"timeout_ms" integer DEFAULT 60000 NOT NULL,
	"max_result_bytes" integer DEFAULT 1048576 NOT NULL,
	"rate_limit_rpm" integer DEFAULT 300 NOT NULL,
	"status" text DEFAULT 'active' NOT NULL,
	"protocol_era" text,
	"health" text DEFAULT 'unknown' NOT NULL,
	"consecutive_failures" integer DEFAULT 0 NOT NULL,
	"last_synced_at" timestamp with time zone,
	"last_sync_error" text,
	"version" integer DEFAULT 1 NOT NULL,
	"managed_by" text DEFAULT 'api' NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "org_settings" ADD COLUMN "mcp_enabled" boolean DEFAULT true NOT NULL;--> statement-breakpoint
ALTER TABLE "mcp_key_grants" ADD CONSTRAINT "mcp_key_grants_org_id_organizations_id_fk" FOREIGN KEY ("org_id") REFERENCES "public"."organizations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "mcp_key_grants" ADD CONSTRAINT "mcp_key_grants_server_id_mcp_servers_id_fk" FOREIGN KEY ("server_id") REFERENCES "public"."mcp_servers"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "mcp_server_tools" ADD CONSTRAINT "mcp_server_tools_org_id_organizations_id_fk" FOREIGN KEY ("org_id") REFERENCES "public"."organizations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "mcp_server_tools" ADD CONSTRAINT "mcp_server_tools_server_id_mcp_servers_id_fk" FOREIGN KEY ("server_id") REFERENCES "public"."mcp_servers"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "mcp_servers" ADD CONSTRAINT "mcp_servers_org_id_organizations_id_fk" FOREIGN KEY ("org_id") REFERENCES "public"."organizations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "mcp_key_grants_lineage_server" ON "mcp_key_grants" USING btree ("key_lineage_id","server_id");--> statement-breakpoint
CREATE INDEX "mcp_key_grants_org" ON "mcp_key_grants" USING btree ("org_id");--> statement-breakpoint
CREATE UNIQUE INDEX "mcp_server_tools_server_name" ON "mcp_server_tools" USING btree ("server_id","upstream_name");--> statement-breakpoint
CREATE UNIQUE INDEX "mcp_server_tools_org_exposed" ON "mcp_server_tools" USING btree ("org_id","exposed_name") WHERE "mcp_server_tools"."exposed_name" is not null;--> statement-breakpoint
CREATE INDEX "mcp_server_tools_org" ON "mcp_server_tools" USING btree ("org_id");--> statement-breakpoint
CREATE UNIQUE INDEX "mcp_servers_org_slug" ON "mcp_servers" USING btree ("org_id","slug");--> statement-breakpoint
CREATE INDEX "mcp_servers_status" ON "mcp_servers" USING btree ("status","id");