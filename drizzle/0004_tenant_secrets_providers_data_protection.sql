CREATE TABLE "data_protection_keys" (
	"id" uuid PRIMARY KEY NOT NULL,
	"protection" text NOT NULL,
	"certificate_thumbprint" text,
	"key_material" text NOT NULL,
	"activates_at" timestamp with time zone NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	"revoked_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "data_protection_keys_protection_check" CHECK ("data_protection_keys"."protection" in ('rsa-oaep-sha256', 'none'))
);
--> statement-breakpoint
CREATE TABLE "tenant_external_providers" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"tenant_id" uuid NOT NULL,
	"type" text NOT NULL,
	"provider" text NOT NULL,
	"status" text DEFAULT 'Active' NOT NULL,
	"settings" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"secret_refs" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "tenant_external_providers_tenant_type_unique" UNIQUE("tenant_id","type"),
	CONSTRAINT "tenant_external_providers_type_check" CHECK ("tenant_external_providers"."type" in ('identity', 'sms', 'payment', 'notification', 'ai')),
	CONSTRAINT "tenant_external_providers_status_check" CHECK ("tenant_external_providers"."status" in ('Active', 'Disabled', 'Suspended'))
);
--> statement-breakpoint
CREATE TABLE "tenant_secrets" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"tenant_id" uuid NOT NULL,
	"name" text NOT NULL,
	"key_id" text NOT NULL,
	"nonce" text NOT NULL,
	"ciphertext" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "tenant_secrets_tenant_name_unique" UNIQUE("tenant_id","name")
);
--> statement-breakpoint
ALTER TABLE "tenant_external_providers" ADD CONSTRAINT "tenant_external_providers_tenant_id_tenants_id_fk" FOREIGN KEY ("tenant_id") REFERENCES "public"."tenants"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "tenant_secrets" ADD CONSTRAINT "tenant_secrets_tenant_id_tenants_id_fk" FOREIGN KEY ("tenant_id") REFERENCES "public"."tenants"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "data_protection_keys_expires_idx" ON "data_protection_keys" USING btree ("expires_at");