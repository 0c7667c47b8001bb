CREATE TABLE "passkeys" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"tenant_id" uuid,
	"user_id" uuid NOT NULL,
	"name" text NOT NULL,
	"rp_id" text NOT NULL,
	"credential_id" text NOT NULL,
	"public_key" text NOT NULL,
	"counter" bigint DEFAULT 0 NOT NULL,
	"transports" text[] DEFAULT '{}' NOT NULL,
	"aaguid" text NOT NULL,
	"backup_eligible" boolean NOT NULL,
	"backed_up" boolean NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"last_used_at" timestamp with time zone
);
--> statement-breakpoint
ALTER TABLE "passkeys" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "single_use_tokens" DROP CONSTRAINT "single_use_tokens_purpose_check";--> statement-breakpoint
ALTER TABLE "passkeys" ADD CONSTRAINT "passkeys_tenant_id_tenants_id_fk" FOREIGN KEY ("tenant_id") REFERENCES "public"."tenants"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "passkeys" ADD CONSTRAINT "passkeys_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "passkeys_credential_idx" ON "passkeys" USING btree ("rp_id","credential_id");--> statement-breakpoint
CREATE INDEX "passkeys_user_idx" ON "passkeys" USING btree ("user_id");--> statement-breakpoint
CREATE INDEX "passkeys_tenant_idx" ON "passkeys" USING btree ("tenant_id");--> statement-breakpoint
ALTER TABLE "single_use_tokens" ADD CONSTRAINT "single_use_tokens_purpose_check" CHECK ("single_use_tokens"."purpose" in ('password_reset', 'email_verification', 'invitation', 'sign_up', 'sign_in_link', 'passkey_registration', 'passkey_sign_in'));--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "passkeys" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on') WITH CHECK (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on');--> statement-breakpoint
ALTER TABLE "passkeys" FORCE ROW LEVEL SECURITY;
