ALTER TABLE "platform_role_bindings" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "refresh_tokens" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "webhook_delivery_attempts" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "platform_role_bindings" AS PERMISSIVE FOR ALL TO public USING (exists (select 1 from "users" p where p.id = "platform_role_bindings"."user_id")) WITH CHECK (exists (select 1 from "users" p where p.id = "platform_role_bindings"."user_id"));--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "refresh_tokens" AS PERMISSIVE FOR ALL TO public USING (exists (select 1 from "sessions" p where p.id = "refresh_tokens"."session_id")) WITH CHECK (exists (select 1 from "sessions" p where p.id = "refresh_tokens"."session_id"));--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "webhook_delivery_attempts" AS PERMISSIVE FOR ALL TO public USING (exists (select 1 from "webhook_deliveries" p where p.id = "webhook_delivery_attempts"."delivery_id")) WITH CHECK (exists (select 1 from "webhook_deliveries" p where p.id = "webhook_delivery_attempts"."delivery_id"));--> statement-breakpoint
ALTER TABLE "platform_role_bindings" FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "refresh_tokens" FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "webhook_delivery_attempts" FORCE ROW LEVEL SECURITY;
