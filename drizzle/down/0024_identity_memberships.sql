-- Down step of 0024_identity_memberships: every identity goes back to one tenant. Users, passwords,
-- sessions, refresh tokens and audit rows keep their ids. A shared identity with one membership
-- becomes that tenant's own user; one with none signs in nowhere and is deleted (its sessions with
-- it). A shared identity in several tenants cannot be expressed without memberships: the step
-- refuses (nothing changes) until it is down to one (docs/auth.md, "Memberships").
DO $$
BEGIN
  IF EXISTS (
    SELECT 1 FROM "tenant_memberships" m JOIN "users" u ON u."id" = m."user_id"
    WHERE u."pool" = 'shared' GROUP BY u."id" HAVING count(*) > 1
  ) THEN
    RAISE EXCEPTION 'identities with memberships in several tenants exist: remove all but one membership of each (select user_id from tenant_memberships join users on users.id = user_id where pool = ''shared'' group by user_id having count(*) > 1) before migrating down';
  END IF;
END $$;--> statement-breakpoint
ALTER TABLE "users" DROP CONSTRAINT "users_pool_check";--> statement-breakpoint
UPDATE "users" u SET "tenant_id" = m."tenant_id", "pool" = 'tenant'
  FROM "tenant_memberships" m WHERE m."user_id" = u."id" AND u."pool" = 'shared';--> statement-breakpoint
DELETE FROM "users" WHERE "pool" = 'shared';--> statement-breakpoint
UPDATE "users" u SET "status" = 'Disabled'
  FROM "tenant_memberships" m
  WHERE m."user_id" = u."id" AND m."tenant_id" = u."tenant_id" AND m."status" = 'Disabled' AND u."status" <> 'Disabled';--> statement-breakpoint
ALTER TABLE "users" DROP CONSTRAINT "users_pool_email_unique";--> statement-breakpoint
DROP INDEX "users_pool_phone_idx";--> statement-breakpoint
ALTER TABLE "users" DROP COLUMN "pool";--> statement-breakpoint
ALTER TABLE "tenant_memberships" DROP COLUMN "status";--> statement-breakpoint
ALTER TABLE "tenants" DROP COLUMN "private_identities";--> statement-breakpoint
ALTER TABLE "users" ADD CONSTRAINT "users_tenant_email_unique" UNIQUE NULLS NOT DISTINCT("tenant_id","email");--> statement-breakpoint
CREATE UNIQUE INDEX "users_tenant_phone_idx" ON "users" USING btree (coalesce("tenant_id", '00000000-0000-0000-0000-000000000000'::uuid),"phone") WHERE "users"."phone" is not null;
