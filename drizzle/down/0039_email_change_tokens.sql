-- Down step of 0039_email_change_tokens: open change-of-address links are dropped with the purpose
-- that named them (those addresses stay as they are).
DELETE FROM "single_use_tokens" WHERE "purpose" = 'email_change';--> statement-breakpoint
ALTER TABLE "single_use_tokens" DROP CONSTRAINT "single_use_tokens_purpose_check";--> statement-breakpoint
ALTER TABLE "single_use_tokens" ADD CONSTRAINT "single_use_tokens_purpose_check" CHECK ("single_use_tokens"."purpose" in ('password_reset', 'email_verification', 'invitation', 'sign_up', 'sign_in_link', 'passkey_registration', 'passkey_sign_in', 'mfa_sign_in'));
