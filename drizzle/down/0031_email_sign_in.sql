-- Down step of 0031_email_sign_in: open e-mail sign-in codes and links stop working; tenants lose
-- the setting (password and SMS sign-in are as before).
DROP TABLE "email_sign_in_codes";--> statement-breakpoint
ALTER TABLE "tenants" DROP COLUMN "email_sign_in";
