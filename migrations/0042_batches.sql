CREATE TABLE "batch_items" (
	"batch_id" text NOT NULL,
	"line" integer NOT NULL,
	"custom_id" text NOT NULL,
	"outcome" text,
	"attempts" integer DEFAULT 0 NOT NULL,
	"status_code" integer,
	"request_id" text,
	"body" jsonb,
	"cost_nanos" bigint,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "batch_items_pk" PRIMARY KEY("batch_id","line")
);
--> statement-breakpoint
CREATE TABLE "batches" (
	"id" text PRIMARY KEY NOT NULL,
	"org_id" text NOT NULL,
	"key_id" text NOT NULL,
	"lineage_id" text NOT NULL,
	"project_id" text NOT NULL,
	"wire" text NOT NULL,
	"endpoint" text NOT NULL,
	"input_file_id" text NOT NULL,
	"completion_window" text NOT NULL,
	"status" text DEFAULT 'validating' NOT NULL,
	"metadata" jsonb,
	"errors" jsonb,
	"chunk_starts" jsonb,
	"chunk_items" integer NOT NULL,
	"total" integer DEFAULT 0 NOT NULL,
	"completed" integer DEFAULT 0 NOT NULL,
	"failed" integer DEFAULT 0 NOT NULL,
	"unrun" integer DEFAULT 0 NOT NULL,
	"rerun" integer DEFAULT 0 NOT NULL,
	"cost_nanos" bigint DEFAULT 0 NOT NULL,
	"output_file_id" text,
	"error_file_id" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"in_progress_at" timestamp with time zone,
	"finalizing_at" timestamp with time zone,
	"completed_at" timestamp with time zone,
	"failed_at" timestamp with time zone,
	"expired_at" timestamp with time zone,
	"cancelling_at" timestamp with time zone,
	"cancelled_at" timestamp with time zone,
	"expires_at" timestamp with time zone NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "files" (
	"id" text PRIMARY KEY NOT NULL,
	"org_id" text NOT NULL,
	"key_id" text NOT NULL,
	"lineage_id" text NOT NULL,
	"project_id" text NOT NULL,
	"purpose" text NOT NULL,
	"filename" text NOT NULL,
	"bytes" bigint NOT NULL,
	"storage_key" text NOT NULL,
	"expires_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "request_logs" ADD COLUMN "batch_id" text;--> statement-breakpoint
ALTER TABLE "batch_items" ADD CONSTRAINT "batch_items_batch_id_batches_id_fk" FOREIGN KEY ("batch_id") REFERENCES "public"."batches"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "batches" ADD CONSTRAINT "batches_org_id_organizations_id_fk" FOREIGN KEY ("org_id") REFERENCES "public"."organizations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "files" ADD CONSTRAINT "files_org_id_organizations_id_fk" FOREIGN KEY ("org_id") REFERENCES "public"."organizations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "batches_org_id" ON "batches" USING btree ("org_id","id");--> statement-breakpoint
CREATE INDEX "batches_lineage_id" ON "batches" USING btree ("lineage_id","id");--> statement-breakpoint
CREATE INDEX "files_org_id" ON "files" USING btree ("org_id","id");--> statement-breakpoint
CREATE INDEX "files_lineage_id" ON "files" USING btree ("lineage_id","id");