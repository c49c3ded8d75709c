CREATE TABLE "price_snapshots" (
	"org_id" text NOT NULL,
	"provider" text NOT NULL,
	"model" text NOT NULL,
	"input_per_million" double precision,
	"output_per_million" double precision,
	"seen_at" timestamp with time zone NOT NULL,
	CONSTRAINT "price_snapshots_pk" PRIMARY KEY("org_id","provider","model")
);
--> statement-breakpoint
ALTER TABLE "price_snapshots" ADD CONSTRAINT "price_snapshots_org_id_organizations_id_fk" FOREIGN KEY ("org_id") REFERENCES "public"."organizations"("id") ON DELETE cascade ON UPDATE no action;