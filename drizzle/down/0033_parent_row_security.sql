-- Down step of 0033_parent_row_security: the tables reached through a parent (refresh tokens through
-- their session, delivery attempts through their delivery, platform role bindings through their
-- user) lose their row-level security and policy again; no row changes.
DROP POLICY "tenant_isolation" ON "platform_role_bindings";--> statement-breakpoint
DROP POLICY "tenant_isolation" ON "refresh_tokens";--> statement-breakpoint
DROP POLICY "tenant_isolation" ON "webhook_delivery_attempts";--> statement-breakpoint
ALTER TABLE "platform_role_bindings" NO FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "refresh_tokens" NO FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "webhook_delivery_attempts" NO FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "platform_role_bindings" DISABLE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "refresh_tokens" DISABLE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "webhook_delivery_attempts" DISABLE ROW LEVEL SECURITY;
