ALTER TABLE "api_keys" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "audit_events" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "subscription_history" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "subscriptions" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "tenant_feature_overrides" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "usage_counters" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "usage_events" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "usage_reconciliations" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "tenant_domains" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "email_messages" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "sessions" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "sms_codes" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "tenant_memberships" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "users" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "tenant_external_providers" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "tenant_secrets" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "single_use_tokens" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "storage_grants" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "usage_threshold_notices" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "webhook_deliveries" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "webhook_endpoints" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "webhook_events" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "api_keys" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on') WITH CHECK (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on');--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "audit_events" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on') WITH CHECK (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on');--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "subscription_history" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on') WITH CHECK (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on');--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "subscriptions" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on') WITH CHECK (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on');--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "tenant_feature_overrides" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on') WITH CHECK (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on');--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "usage_counters" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on') WITH CHECK (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on');--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "usage_events" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on') WITH CHECK (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on');--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "usage_reconciliations" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on') WITH CHECK (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on');--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "tenant_domains" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on') WITH CHECK (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on');--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "email_messages" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on') WITH CHECK (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on');--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "sessions" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on') WITH CHECK (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on');--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "sms_codes" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on') WITH CHECK (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on');--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "tenant_memberships" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on') WITH CHECK (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on');--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "users" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on') WITH CHECK (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on');--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "tenant_external_providers" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on') WITH CHECK (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on');--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "tenant_secrets" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on') WITH CHECK (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on');--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "single_use_tokens" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on') WITH CHECK (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on');--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "storage_grants" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on') WITH CHECK (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on');--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "usage_threshold_notices" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on') WITH CHECK (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on');--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "webhook_deliveries" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on') WITH CHECK (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on');--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "webhook_endpoints" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on') WITH CHECK (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on');--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "webhook_events" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on') WITH CHECK (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on');--> statement-breakpoint
-- drizzle-kit writes no FORCE: without it the tables' owner would pass every policy (docs/architecture.md)
ALTER TABLE "api_keys" FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "audit_events" FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "subscription_history" FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "subscriptions" FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "tenant_feature_overrides" FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "usage_counters" FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "usage_events" FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "usage_reconciliations" FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "tenant_domains" FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "email_messages" FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "sessions" FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "sms_codes" FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "tenant_memberships" FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "users" FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "tenant_external_providers" FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "tenant_secrets" FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "single_use_tokens" FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "storage_grants" FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "usage_threshold_notices" FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "webhook_deliveries" FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "webhook_endpoints" FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "webhook_events" FORCE ROW LEVEL SECURITY;
