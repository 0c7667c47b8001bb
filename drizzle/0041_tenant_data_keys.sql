CREATE TABLE "tenant_data_keys" (
	"tenant_id" uuid PRIMARY KEY NOT NULL,
	"key_id" text NOT NULL,
	"wrapping_key_id" text NOT NULL,
	"nonce" text NOT NULL,
	"wrapped" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "tenant_data_keys_key_id_unique" UNIQUE("key_id")
);
--> statement-breakpoint
ALTER TABLE "tenant_data_keys" ENABLE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "tenant_data_keys" ADD CONSTRAINT "tenant_data_keys_tenant_id_tenants_id_fk" FOREIGN KEY ("tenant_id") REFERENCES "public"."tenants"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE POLICY "tenant_isolation" ON "tenant_data_keys" AS PERMISSIVE FOR ALL TO public USING (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on') WITH CHECK (tenant_id = nullif(current_setting('plinth.tenant_id', true), '')::uuid or current_setting('plinth.platform', true) = 'on');--> statement-breakpoint
ALTER TABLE "tenant_data_keys" FORCE ROW LEVEL SECURITY;
