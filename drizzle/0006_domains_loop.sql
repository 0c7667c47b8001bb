DROP INDEX "tenant_domains_due_idx";--> statement-breakpoint
ALTER TABLE "tenant_domains" ADD COLUMN "gateway_status" text;--> statement-breakpoint
ALTER TABLE "tenant_domains" ADD COLUMN "last_failure_code" text;--> statement-breakpoint
CREATE INDEX "tenant_domains_due_idx" ON "tenant_domains" USING btree ("next_check_at") WHERE "tenant_domains"."status" <> 'Active' or "tenant_domains"."tls_status" is distinct from 'active';