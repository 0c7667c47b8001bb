-- Down step of 0029_passkeys: every passkey is forgotten (its users sign in with their other
-- factors) and open passkey challenges are dropped with the purposes that named them.
DELETE FROM "single_use_tokens" WHERE "purpose" IN ('passkey_registration', 'passkey_sign_in');--> statement-breakpoint
ALTER TABLE "single_use_tokens" DROP CONSTRAINT "single_use_tokens_purpose_check";--> statement-breakpoint
ALTER TABLE "single_use_tokens" ADD CONSTRAINT "single_use_tokens_purpose_check" CHECK ("single_use_tokens"."purpose" in ('password_reset', 'email_verification', 'invitation', 'sign_up', 'sign_in_link'));--> statement-breakpoint
DROP TABLE "passkeys";
