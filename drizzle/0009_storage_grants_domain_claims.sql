CREATE TABLE "storage_grants" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"tenant_id" uuid NOT NULL,
	"key" text NOT NULL,
	"object_key" text NOT NULL,
	"size" bigint NOT NULL,
	"uploaded_by" uuid,
	"expires_at" timestamp with time zone NOT NULL,
	"deleted_at" timestamp with time zone,
	"refunded_at" timestamp with time zone,
	"confirmed_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "storage_grants_objectKey_unique" UNIQUE("object_key")
);
--> statement-breakpoint
ALTER TABLE "tenant_domains" DROP CONSTRAINT "tenant_domains_hostname_unique";--> statement-breakpoint
ALTER TABLE "tenant_domains" ADD COLUMN "expires_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "tenant_domains" ADD COLUMN "deactivated_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "storage_grants" ADD CONSTRAINT "storage_grants_tenant_id_tenants_id_fk" FOREIGN KEY ("tenant_id") REFERENCES "public"."tenants"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "storage_grants_tenant_key_idx" ON "storage_grants" USING btree ("tenant_id","key");--> statement-breakpoint
CREATE INDEX "storage_grants_unsettled_idx" ON "storage_grants" USING btree ("tenant_id","expires_at") WHERE "storage_grants"."refunded_at" is null and ("storage_grants"."deleted_at" is not null or "storage_grants"."confirmed_at" is null);--> statement-breakpoint
CREATE UNIQUE INDEX "tenant_domains_tenant_hostname_idx" ON "tenant_domains" USING btree ("tenant_id","hostname");--> statement-breakpoint
CREATE UNIQUE INDEX "tenant_domains_active_hostname_idx" ON "tenant_domains" USING btree ("hostname") WHERE "tenant_domains"."status" = 'Active';--> statement-breakpoint
CREATE INDEX "tenant_domains_expiry_idx" ON "tenant_domains" USING btree ("expires_at") WHERE "tenant_domains"."status" <> 'Active';--> statement-breakpoint
-- claims made before expiry existed: they expire 14 days (the default) after this migration
UPDATE "tenant_domains" SET "expires_at" = now() + interval '14 days' WHERE "status" <> 'Active';