-- Down step of 0027_sign_up_requests: pending sign-ups are forgotten (their links stop working);
-- tenants already made stay.
UPDATE "single_use_tokens" SET "used_at" = now() WHERE "purpose" = 'sign_up' AND "used_at" IS NULL;--> statement-breakpoint
DROP TABLE "sign_up_requests";
