-- Down step of 0026_tenant_invitations: the invitations go (pending links stop working; members
-- who accepted stay members). Their single-use tokens are spent.
UPDATE "single_use_tokens" SET "used_at" = now() WHERE "purpose" = 'invitation' AND "used_at" IS NULL;--> statement-breakpoint
DROP TABLE "tenant_invitations";
