ALTER TABLE "tenants" ADD COLUMN "require_mfa" text DEFAULT 'off' NOT NULL;--> statement-breakpoint
ALTER TABLE "tenants" ADD COLUMN "mfa_grace_days" integer DEFAULT 7 NOT NULL;--> statement-breakpoint
ALTER TABLE "tenants" ADD COLUMN "mfa_required_since" timestamp with time zone;