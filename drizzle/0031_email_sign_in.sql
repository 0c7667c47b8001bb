CREATE TABLE "email_sign_in_codes" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"tenant_id" uuid NOT NULL,
	"user_id" uuid NOT NULL,
	"email" text NOT NULL,
	"code_hash" text NOT NULL,
	"link_hash" text NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	"consumed_at" timestamp with time zone,
	CONSTRAINT "email_sign_in_codes_linkHash_unique" UNIQUE("link_hash")
);
--> statement-breakpoint
ALTER TABLE "email_sign_in_codes" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "tenants" ADD COLUMN "email_sign_in" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "email_sign_in_codes" ADD CONSTRAINT "email_sign_in_codes_tenant_id_tenants_id_fk" FOREIGN KEY ("tenant_id") REFERENCES "public"."tenants"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "email_sign_in_codes" ADD CONSTRAINT "email_sign_in_codes_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "email_sign_in_codes_lookup_idx" ON "email_sign_in_codes" USING btree ("tenant_id","email","created_at");--> statement-breakpoint
CREATE INDEX "email_sign_in_codes_user_idx" ON "email_sign_in_codes" USING btree ("user_id");--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "email_sign_in_codes" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on') WITH CHECK (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on');--> statement-breakpoint
ALTER TABLE "email_sign_in_codes" FORCE ROW LEVEL SECURITY;
