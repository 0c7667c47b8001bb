-- Down step of 0038_mfa_policy: tenants forget their second-factor policy (nobody is held to one).
ALTER TABLE "tenants" DROP COLUMN "mfa_required_since";--> statement-breakpoint
ALTER TABLE "tenants" DROP COLUMN "mfa_grace_days";--> statement-breakpoint
ALTER TABLE "tenants" DROP COLUMN "require_mfa";
