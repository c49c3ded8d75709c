CREATE TABLE "budget_crossings" (
	"id" text PRIMARY KEY NOT NULL,
	"org_id" text NOT NULL,
	"scope" text NOT NULL,
	"window" text NOT NULL,
	"fraction" numeric NOT NULL,
	"limit" numeric NOT NULL,
	"spent" numeric NOT NULL,
	"behavior" text NOT NULL,
	"crossed_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "budget_crossings" ADD CONSTRAINT "budget_crossings_org_id_organizations_id_fk" FOREIGN KEY ("org_id") REFERENCES "public"."organizations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "budget_crossings_once" ON "budget_crossings" USING btree ("org_id","scope","window","fraction");--> statement-breakpoint
CREATE INDEX "budget_crossings_org" ON "budget_crossings" USING btree ("org_id","crossed_at");