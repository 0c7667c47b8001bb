CREATE TABLE "sso_setup_links" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"tenant_id" uuid NOT NULL,
	"token_hash" text NOT NULL,
	"created_by" uuid,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"expires_at" timestamp with time zone DEFAULT now() + interval '72 hours' NOT NULL,
	"opened_at" timestamp with time zone,
	"opened_by" uuid,
	"revoked_at" timestamp with time zone,
	CONSTRAINT "sso_setup_links_tokenHash_unique" UNIQUE("token_hash")
);
--> statement-breakpoint
ALTER TABLE "sso_setup_links" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "sso_setup_links" ADD CONSTRAINT "sso_setup_links_tenant_id_tenants_id_fk" FOREIGN KEY ("tenant_id") REFERENCES "public"."tenants"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "sso_setup_links" ADD CONSTRAINT "sso_setup_links_created_by_users_id_fk" FOREIGN KEY ("created_by") REFERENCES "public"."users"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "sso_setup_links" ADD CONSTRAINT "sso_setup_links_opened_by_users_id_fk" FOREIGN KEY ("opened_by") REFERENCES "public"."users"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "sso_setup_links_tenant_idx" ON "sso_setup_links" USING btree ("tenant_id","created_at","id");--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "sso_setup_links" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on') WITH CHECK (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on');--> statement-breakpoint
ALTER TABLE "sso_setup_links" FORCE ROW LEVEL SECURITY;
