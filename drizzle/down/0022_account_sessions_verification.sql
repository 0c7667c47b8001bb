-- Down step of 0022_account_sessions_verification: impersonated sessions are ended first (without
-- their marker they would look like the user's own), then the columns go. Verified addresses become
-- unverified to the older version (it has no notion of them).
UPDATE "sessions" SET "revoked_at" = now(), "revoked_reason" = 'impersonation (rolled back)'
  WHERE "impersonator_id" IS NOT NULL AND "revoked_at" IS NULL;--> statement-breakpoint
ALTER TABLE "sessions" DROP CONSTRAINT "sessions_impersonator_id_users_id_fk";--> statement-breakpoint
ALTER TABLE "sessions" DROP COLUMN "impersonation_reason";--> statement-breakpoint
ALTER TABLE "sessions" DROP COLUMN "impersonator_id";--> statement-breakpoint
ALTER TABLE "sessions" DROP COLUMN "client_ip";--> statement-breakpoint
ALTER TABLE "sessions" DROP COLUMN "user_agent";--> statement-breakpoint
ALTER TABLE "users" DROP COLUMN "email_verified_at";
