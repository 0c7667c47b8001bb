CREATE TABLE "sso_connections" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"tenant_id" uuid NOT NULL,
	"type" text NOT NULL,
	"name" text DEFAULT '' NOT NULL,
	"status" text DEFAULT 'active' NOT NULL,
	"issuer" text,
	"client_id" text,
	"client_secret_name" text,
	"settings" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"claim_mapping" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"default_role" text DEFAULT 'member' NOT NULL,
	"group_roles" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "sso_connections_type_check" CHECK ("sso_connections"."type" in ('oidc', 'saml')),
	CONSTRAINT "sso_connections_status_check" CHECK ("sso_connections"."status" in ('active', 'inactive'))
);
--> statement-breakpoint
ALTER TABLE "sso_connections" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
CREATE TABLE "sso_sign_in_attempts" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"tenant_id" uuid NOT NULL,
	"connection_id" uuid NOT NULL,
	"state_hash" text NOT NULL,
	"return_to" text,
	"test" boolean DEFAULT false NOT NULL,
	"data" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	CONSTRAINT "sso_sign_in_attempts_stateHash_unique" UNIQUE("state_hash")
);
--> statement-breakpoint
ALTER TABLE "sso_sign_in_attempts" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
CREATE TABLE "sso_sign_in_codes" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"tenant_id" uuid NOT NULL,
	"user_id" uuid NOT NULL,
	"connection_id" uuid NOT NULL,
	"code_hash" text NOT NULL,
	"amr" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	"used_at" timestamp with time zone,
	CONSTRAINT "sso_sign_in_codes_codeHash_unique" UNIQUE("code_hash")
);
--> statement-breakpoint
ALTER TABLE "sso_sign_in_codes" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
CREATE TABLE "tenant_email_domains" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"tenant_id" uuid NOT NULL,
	"domain" text NOT NULL,
	"status" text DEFAULT 'pending' NOT NULL,
	"verification_token" text NOT NULL,
	"last_checked_at" timestamp with time zone,
	"last_failure_code" text,
	"last_failure_reason" text,
	"verified_at" timestamp with time zone,
	"expires_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "tenant_email_domains_status_check" CHECK ("tenant_email_domains"."status" in ('pending', 'failed', 'verified'))
);
--> statement-breakpoint
ALTER TABLE "tenant_email_domains" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
CREATE TABLE "tenant_sso_settings" (
	"tenant_id" uuid NOT NULL,
	"enforced" boolean DEFAULT false NOT NULL,
	"break_glass_user_id" uuid,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "tenant_sso_settings_tenant_id_pk" PRIMARY KEY("tenant_id")
);
--> statement-breakpoint
ALTER TABLE "tenant_sso_settings" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "sso_connections" ADD CONSTRAINT "sso_connections_tenant_id_tenants_id_fk" FOREIGN KEY ("tenant_id") REFERENCES "public"."tenants"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "sso_sign_in_attempts" ADD CONSTRAINT "sso_sign_in_attempts_tenant_id_tenants_id_fk" FOREIGN KEY ("tenant_id") REFERENCES "public"."tenants"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "sso_sign_in_attempts" ADD CONSTRAINT "sso_sign_in_attempts_connection_id_sso_connections_id_fk" FOREIGN KEY ("connection_id") REFERENCES "public"."sso_connections"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "sso_sign_in_codes" ADD CONSTRAINT "sso_sign_in_codes_tenant_id_tenants_id_fk" FOREIGN KEY ("tenant_id") REFERENCES "public"."tenants"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "sso_sign_in_codes" ADD CONSTRAINT "sso_sign_in_codes_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "sso_sign_in_codes" ADD CONSTRAINT "sso_sign_in_codes_connection_id_sso_connections_id_fk" FOREIGN KEY ("connection_id") REFERENCES "public"."sso_connections"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "tenant_email_domains" ADD CONSTRAINT "tenant_email_domains_tenant_id_tenants_id_fk" FOREIGN KEY ("tenant_id") REFERENCES "public"."tenants"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "tenant_sso_settings" ADD CONSTRAINT "tenant_sso_settings_tenant_id_tenants_id_fk" FOREIGN KEY ("tenant_id") REFERENCES "public"."tenants"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "tenant_sso_settings" ADD CONSTRAINT "tenant_sso_settings_break_glass_user_id_users_id_fk" FOREIGN KEY ("break_glass_user_id") REFERENCES "public"."users"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "sso_connections_tenant_idx" ON "sso_connections" USING btree ("tenant_id");--> statement-breakpoint
CREATE UNIQUE INDEX "sso_connections_active_idx" ON "sso_connections" USING btree ("tenant_id") WHERE "sso_connections"."status" = 'active';--> statement-breakpoint
CREATE INDEX "sso_sign_in_attempts_expiry_idx" ON "sso_sign_in_attempts" USING btree ("expires_at");--> statement-breakpoint
CREATE INDEX "sso_sign_in_codes_expiry_idx" ON "sso_sign_in_codes" USING btree ("expires_at");--> statement-breakpoint
CREATE INDEX "tenant_email_domains_tenant_idx" ON "tenant_email_domains" USING btree ("tenant_id");--> statement-breakpoint
CREATE UNIQUE INDEX "tenant_email_domains_tenant_domain_idx" ON "tenant_email_domains" USING btree ("tenant_id","domain");--> statement-breakpoint
CREATE UNIQUE INDEX "tenant_email_domains_verified_idx" ON "tenant_email_domains" USING btree ("domain") WHERE "tenant_email_domains"."status" = 'verified';--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "sso_connections" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on') WITH CHECK (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on');--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "sso_sign_in_attempts" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on') WITH CHECK (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on');--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "sso_sign_in_codes" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on') WITH CHECK (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on');--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "tenant_email_domains" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on') WITH CHECK (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on');--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "tenant_sso_settings" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on') WITH CHECK (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on');--> statement-breakpoint
ALTER TABLE "sso_connections" FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "sso_sign_in_attempts" FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "sso_sign_in_codes" FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "tenant_email_domains" FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "tenant_sso_settings" FORCE ROW LEVEL SECURITY;
