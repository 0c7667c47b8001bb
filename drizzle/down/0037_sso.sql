-- Down step of 0037_sso: single sign-on goes (connections, sign-ins under way, unspent codes, the
-- verified e-mail domains and enforcement). Members provisioned through SSO stay members; their
-- sealed client secrets stay in tenant_secrets under `sso.<connection id>.client_secret`.
DROP TABLE "sso_sign_in_codes";--> statement-breakpoint
DROP TABLE "sso_sign_in_attempts";--> statement-breakpoint
DROP TABLE "sso_connections";--> statement-breakpoint
DROP TABLE "tenant_sso_settings";--> statement-breakpoint
DROP TABLE "tenant_email_domains";
