-- Down step of 0036_second_factors: TOTP authenticators and backup codes go (users must enrol again
-- after an upgrade), sessions forget how they were authenticated, open sign-in steps are spent.
DELETE FROM "single_use_tokens" WHERE "purpose" = 'mfa_sign_in';--> statement-breakpoint
ALTER TABLE "single_use_tokens" DROP CONSTRAINT "single_use_tokens_purpose_check";--> statement-breakpoint
ALTER TABLE "single_use_tokens" ADD CONSTRAINT "single_use_tokens_purpose_check" CHECK ("single_use_tokens"."purpose" in ('password_reset', 'email_verification', 'invitation', 'sign_up', 'sign_in_link', 'passkey_registration', 'passkey_sign_in'));--> statement-breakpoint
ALTER TABLE "sessions" DROP COLUMN "auth_time";--> statement-breakpoint
ALTER TABLE "sessions" DROP COLUMN "amr";--> statement-breakpoint
DROP TABLE "totp_factors";--> statement-breakpoint
DROP TABLE "backup_codes";
