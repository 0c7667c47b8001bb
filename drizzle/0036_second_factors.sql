CREATE TABLE "backup_codes" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"user_id" uuid NOT NULL,
	"code_hash" text NOT NULL,
	"used_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "backup_codes" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
CREATE TABLE "totp_factors" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"user_id" uuid NOT NULL,
	"secret_key_id" text NOT NULL,
	"secret_nonce" text NOT NULL,
	"secret_ciphertext" text NOT NULL,
	"confirmed_at" timestamp with time zone,
	"last_used_step" bigint,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "totp_factors_user_unique" UNIQUE("user_id")
);
--> statement-breakpoint
ALTER TABLE "totp_factors" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "single_use_tokens" DROP CONSTRAINT "single_use_tokens_purpose_check";--> statement-breakpoint
ALTER TABLE "sessions" ADD COLUMN "amr" text[] DEFAULT '{}'::text[] NOT NULL;--> statement-breakpoint
ALTER TABLE "sessions" ADD COLUMN "auth_time" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "backup_codes" ADD CONSTRAINT "backup_codes_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "totp_factors" ADD CONSTRAINT "totp_factors_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "backup_codes_user_idx" ON "backup_codes" USING btree ("user_id");--> statement-breakpoint
ALTER TABLE "single_use_tokens" ADD CONSTRAINT "single_use_tokens_purpose_check" CHECK ("single_use_tokens"."purpose" in ('password_reset', 'email_verification', 'invitation', 'sign_up', 'sign_in_link', 'passkey_registration', 'passkey_sign_in', 'mfa_sign_in'));--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "backup_codes" AS PERMISSIVE FOR ALL TO public USING (exists (select 1 from "users" p where p.id = "backup_codes"."user_id")) WITH CHECK (exists (select 1 from "users" p where p.id = "backup_codes"."user_id"));--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "totp_factors" AS PERMISSIVE FOR ALL TO public USING (exists (select 1 from "users" p where p.id = "totp_factors"."user_id")) WITH CHECK (exists (select 1 from "users" p where p.id = "totp_factors"."user_id"));--> statement-breakpoint
ALTER TABLE "backup_codes" FORCE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "totp_factors" FORCE ROW LEVEL SECURITY;
