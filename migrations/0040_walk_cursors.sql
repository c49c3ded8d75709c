CREATE TABLE "walk_cursors" (
	"walk" text PRIMARY KEY NOT NULL,
	"after_id" text NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
