-- Down step of 0043_email_domain_recheck: the re-check's record of a vanished TXT record goes; verified
-- domains stay verified.
ALTER TABLE "tenant_email_domains" DROP COLUMN "record_missing_since";
