-- One identity, several tenants (issue #32; docs/decisions.md "One identity, several tenants"). Every
-- existing user keeps its id, password hash, sessions and audit rows: platform staff become the
-- `platform` pool, every tenant user its tenant's own (`tenant`); nobody is merged. A disabled tenant
-- user's membership is disabled too, and a tenant user without a membership gets one as `member`.
ALTER TABLE "users" DROP CONSTRAINT "users_tenant_email_unique";--> statement-breakpoint
DROP INDEX "users_tenant_phone_idx";--> statement-breakpoint
ALTER TABLE "tenant_memberships" ADD COLUMN "status" text DEFAULT 'Active' NOT NULL;--> statement-breakpoint
ALTER TABLE "users" ADD COLUMN "pool" text DEFAULT 'platform' NOT NULL;--> statement-breakpoint
ALTER TABLE "tenants" ADD COLUMN "private_identities" boolean DEFAULT false NOT NULL;--> statement-breakpoint
UPDATE "users" SET "pool" = 'tenant' WHERE "tenant_id" IS NOT NULL;--> statement-breakpoint
INSERT INTO "tenant_memberships" ("tenant_id", "user_id", "role")
  SELECT "tenant_id", "id", 'member' FROM "users" WHERE "tenant_id" IS NOT NULL
  ON CONFLICT DO NOTHING;--> statement-breakpoint
UPDATE "tenant_memberships" m SET "status" = 'Disabled'
  FROM "users" u WHERE u."id" = m."user_id" AND u."tenant_id" = m."tenant_id" AND u."status" = 'Disabled';--> statement-breakpoint
CREATE UNIQUE INDEX "users_pool_phone_idx" ON "users" USING btree ("pool",coalesce("tenant_id", '00000000-0000-0000-0000-000000000000'::uuid),"phone") WHERE "users"."phone" is not null;--> statement-breakpoint
ALTER TABLE "users" ADD CONSTRAINT "users_pool_email_unique" UNIQUE NULLS NOT DISTINCT("pool","tenant_id","email");--> statement-breakpoint
ALTER TABLE "users" ADD CONSTRAINT "users_pool_check" CHECK ("users"."pool" in ('platform', 'tenant', 'shared') and ("users"."pool" = 'tenant') = ("users"."tenant_id" is not null));
