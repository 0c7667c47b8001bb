-- Down step of 0021_tenant_row_level_security: every tenant table without its policy, FORCE and RLS.
-- Tenant isolation is then the queries' own again (the API role, if any, sees every row it is granted).
DROP POLICY "tenant_isolation" ON "api_keys";--> statement-breakpoint
ALTER TABLE "api_keys" NO FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "api_keys" DISABLE ROW LEVEL SECURITY;--> statement-breakpoint
DROP POLICY "tenant_isolation" ON "audit_events";--> statement-breakpoint
ALTER TABLE "audit_events" NO FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "audit_events" DISABLE ROW LEVEL SECURITY;--> statement-breakpoint
DROP POLICY "tenant_isolation" ON "subscription_history";--> statement-breakpoint
ALTER TABLE "subscription_history" NO FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "subscription_history" DISABLE ROW LEVEL SECURITY;--> statement-breakpoint
DROP POLICY "tenant_isolation" ON "subscriptions";--> statement-breakpoint
ALTER TABLE "subscriptions" NO FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "subscriptions" DISABLE ROW LEVEL SECURITY;--> statement-breakpoint
DROP POLICY "tenant_isolation" ON "tenant_feature_overrides";--> statement-breakpoint
ALTER TABLE "tenant_feature_overrides" NO FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "tenant_feature_overrides" DISABLE ROW LEVEL SECURITY;--> statement-breakpoint
DROP POLICY "tenant_isolation" ON "usage_counters";--> statement-breakpoint
ALTER TABLE "usage_counters" NO FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "usage_counters" DISABLE ROW LEVEL SECURITY;--> statement-breakpoint
DROP POLICY "tenant_isolation" ON "usage_events";--> statement-breakpoint
ALTER TABLE "usage_events" NO FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "usage_events" DISABLE ROW LEVEL SECURITY;--> statement-breakpoint
DROP POLICY "tenant_isolation" ON "usage_reconciliations";--> statement-breakpoint
ALTER TABLE "usage_reconciliations" NO FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "usage_reconciliations" DISABLE ROW LEVEL SECURITY;--> statement-breakpoint
DROP POLICY "tenant_isolation" ON "tenant_domains";--> statement-breakpoint
ALTER TABLE "tenant_domains" NO FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "tenant_domains" DISABLE ROW LEVEL SECURITY;--> statement-breakpoint
DROP POLICY "tenant_isolation" ON "email_messages";--> statement-breakpoint
ALTER TABLE "email_messages" NO FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "email_messages" DISABLE ROW LEVEL SECURITY;--> statement-breakpoint
DROP POLICY "tenant_isolation" ON "sessions";--> statement-breakpoint
ALTER TABLE "sessions" NO FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "sessions" DISABLE ROW LEVEL SECURITY;--> statement-breakpoint
DROP POLICY "tenant_isolation" ON "sms_codes";--> statement-breakpoint
ALTER TABLE "sms_codes" NO FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "sms_codes" DISABLE ROW LEVEL SECURITY;--> statement-breakpoint
DROP POLICY "tenant_isolation" ON "tenant_memberships";--> statement-breakpoint
ALTER TABLE "tenant_memberships" NO FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "tenant_memberships" DISABLE ROW LEVEL SECURITY;--> statement-breakpoint
DROP POLICY "tenant_isolation" ON "users";--> statement-breakpoint
ALTER TABLE "users" NO FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "users" DISABLE ROW LEVEL SECURITY;--> statement-breakpoint
DROP POLICY "tenant_isolation" ON "tenant_external_providers";--> statement-breakpoint
ALTER TABLE "tenant_external_providers" NO FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "tenant_external_providers" DISABLE ROW LEVEL SECURITY;--> statement-breakpoint
DROP POLICY "tenant_isolation" ON "tenant_secrets";--> statement-breakpoint
ALTER TABLE "tenant_secrets" NO FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "tenant_secrets" DISABLE ROW LEVEL SECURITY;--> statement-breakpoint
DROP POLICY "tenant_isolation" ON "single_use_tokens";--> statement-breakpoint
ALTER TABLE "single_use_tokens" NO FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "single_use_tokens" DISABLE ROW LEVEL SECURITY;--> statement-breakpoint
DROP POLICY "tenant_isolation" ON "storage_grants";--> statement-breakpoint
ALTER TABLE "storage_grants" NO FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "storage_grants" DISABLE ROW LEVEL SECURITY;--> statement-breakpoint
DROP POLICY "tenant_isolation" ON "usage_threshold_notices";--> statement-breakpoint
ALTER TABLE "usage_threshold_notices" NO FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "usage_threshold_notices" DISABLE ROW LEVEL SECURITY;--> statement-breakpoint
DROP POLICY "tenant_isolation" ON "webhook_deliveries";--> statement-breakpoint
ALTER TABLE "webhook_deliveries" NO FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "webhook_deliveries" DISABLE ROW LEVEL SECURITY;--> statement-breakpoint
DROP POLICY "tenant_isolation" ON "webhook_endpoints";--> statement-breakpoint
ALTER TABLE "webhook_endpoints" NO FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "webhook_endpoints" DISABLE ROW LEVEL SECURITY;--> statement-breakpoint
DROP POLICY "tenant_isolation" ON "webhook_events";--> statement-breakpoint
ALTER TABLE "webhook_events" NO FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "webhook_events" DISABLE ROW LEVEL SECURITY;
