-- Down step of 0032_tenant_lifecycle: exports (their archives stay in object storage), reservations
-- of deleted tenants' codes and hosts, and scheduled deletions are forgotten.
DROP TABLE "tenant_exports";--> statement-breakpoint
DROP TABLE "tenant_reservations";--> statement-breakpoint
ALTER TABLE "tenants" DROP COLUMN "deletion_scheduled_for";--> statement-breakpoint
ALTER TABLE "tenants" DROP COLUMN "deletion_requested_by";--> statement-breakpoint
ALTER TABLE "tenants" DROP COLUMN "deletion_counts";
