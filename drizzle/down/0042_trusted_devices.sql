-- Down step of 0042_trusted_devices. Trusted browsers stop skipping the second-factor step: their
-- users prove a second factor at the next sign-in, as before 0042; nothing else is lost.
DROP TABLE "trusted_devices";--> statement-breakpoint
ALTER TABLE "tenants" DROP COLUMN "allow_trusted_devices";
