CREATE TABLE "security_counters" (
	"key" text PRIMARY KEY NOT NULL,
	"hits" bigint[] DEFAULT '{}' NOT NULL,
	"tat" bigint,
	"expires_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE INDEX "security_counters_expires_at_idx" ON "security_counters" USING btree ("expires_at");