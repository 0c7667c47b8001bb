import { z } from "zod";
import { flag, int, optionalInt, secret, strings } from "./schema-fields.ts";

/**
 * The security and network sections of the configuration schema (the spec's "Security and network
 * settings" table), kept apart from schema.ts for size; Production start-up checks them
 * (production.ts).
 */
export const securitySections = {
  Security: z.object({
    Jwt: z.object({
      Issuer: z.string().min(1).optional().meta({ description: "`iss` of issued tokens." }),
      Audience: z.string().min(1).optional().meta({ description: "`aud` of issued tokens." }),
      CurrentKeyId: z.string().min(1).optional().meta({ description: "`kid` of the signing key." }),
      PrivateKey: z.string().min(1).optional().meta(secret("RSA private key (PEM, PKCS#8 or PKCS#1).")),
      VerificationKeys: z
        .array(z.object({ KeyId: z.string().min(1), PublicKey: z.string().min(1) }))
        .default([])
        .meta({
          description: "Public keys (PEM) that verify tokens, by `KeyId`; keep old keys here while rotating.",
        }),
      AccessTokenMinutes: int(1, 15, "Access token lifetime."),
      RefreshTokenDays: int(1, 30, "Refresh token lifetime."),
    }),
    DataProtection: z.object({
      ApplicationName: z.string().min(1).optional().meta({
        description:
          "Isolates protected payloads per application (`PLINTH_DATA_PROTECTION_APPLICATION_NAME`).",
      }),
      CertificatePath: z.string().min(1).optional().meta({
        description:
          "X.509 certificate with private key, PKCS#12 or PEM (`PLINTH_DATA_PROTECTION_CERTIFICATE_PATH`).",
      }),
      CertificatePassword: z
        .string()
        .optional()
        .meta(secret("Password of the certificate (`PLINTH_DATA_PROTECTION_CERTIFICATE_PASSWORD`).")),
      PreviousCertificates: z
        .array(
          z.object({
            Path: z
              .string()
              .min(1)
              .meta({ description: "A retired certificate (PKCS#12 or PEM) with its private key." }),
            Password: z.string().optional().meta(secret("Password of the retired certificate.")),
          }),
        )
        .default([])
        .meta({
          description:
            "Retired certificates that still unwrap older ring keys after a certificate change; new keys use CertificatePath.",
        }),
      KeyLifetimeDays: int(
        1,
        90,
        "Days a data-protection key is used to protect new payloads; older keys keep unprotecting.",
      ),
    }),
    TenantSecrets: z.object({
      KeyId: z
        .string()
        .min(1)
        .optional()
        .meta({ description: "Id of the master key (`PLINTH_TENANT_SECRET_KEY_ID`)." }),
      MasterKey: z
        .string()
        .min(1)
        .optional()
        .meta(secret("Base64 of exactly 32 bytes (`PLINTH_TENANT_SECRET_MASTER_KEY`).")),
      PreviousKeys: z
        .array(
          z.object({
            KeyId: z.string().min(1).meta({ description: "Id of a retired master key." }),
            MasterKey: z
              .string()
              .min(1)
              .meta(secret("Base64 of exactly 32 bytes: a retired master key, decrypt only.")),
          }),
        )
        .default([])
        .meta({
          description:
            "Retired master keys that still decrypt during a rotation; remove only after `bun run secrets:rotate` exits 0.",
        }),
    }),
  }),
  Authentication: z.object({
    PasswordReset: z.object({
      TokenLifetimeMinutes: int(5, 30, "How long a password reset link works (once)."),
      SendLimit: int(1, 3, "Reset requests per address (and tenant) and window; more answer 429."),
      SendWindowSeconds: int(1, 900, "Password reset request window."),
      IpSendLimit: int(1, 20, "Reset requests per client IP and window, all addresses together."),
    }),
    EmailVerification: z.object({
      TokenLifetimeMinutes: int(5, 1440, "How long an address verification link works (once)."),
    }),
    EmailSignIn: z.object({
      CodeLifetimeSeconds: int(
        60,
        600,
        "How long an e-mailed sign-in code and its link work (once; either spends both).",
      ),
      SendLimit: int(1, 3, "Sign-in messages per address (and tenant) and window; more answer 429."),
      SendWindowSeconds: int(1, 900, "E-mail sign-in send window."),
      IpSendLimit: int(1, 20, "Sign-in messages per client IP and send window, all addresses together."),
      VerifyLimit: int(
        1,
        5,
        "Code attempts per address (and tenant) and window; this many wrong guesses also burn the code.",
      ),
      VerifyWindowSeconds: int(1, 900, "E-mail code verification window."),
      IpVerifyLimit: int(1, 30, "Code attempts per client IP and verify window."),
    }),
    Passkeys: z.object({
      RelyingPartyName: z
        .string()
        .min(1)
        .max(64)
        .default("Plinth")
        .meta({ description: "The name authenticators show for Plinth's passkeys (WebAuthn `rp.name`)." }),
      ChallengeSeconds: z
        .number()
        .int()
        .min(30)
        .max(600)
        .default(300)
        .meta({ description: "How long a passkey ceremony's challenge can be answered, once (30–600)." }),
    }),
    Impersonation: z.object({
      MaxMinutes: z
        .number()
        .int()
        .min(1)
        .max(60)
        .default(60)
        .meta({ description: "The longest impersonation session a platform admin may start (1–60)." }),
    }),
    Sms: z.object({
      CodePepper: z
        .string()
        .optional()
        .meta(secret("HMAC pepper for SMS codes, at least 32 characters (`PLINTH_SMS_CODE_PEPPER`).")),
      CodeLifetimeSeconds: int(30, 300, "How long an SMS code is valid."),
      SendLimit: int(1, 3, "SMS sends per phone number and window."),
      SendWindowSeconds: int(1, 900, "SMS send window."),
      VerifyLimit: int(1, 5, "SMS verification attempts per phone number and window."),
      VerifyWindowSeconds: int(1, 900, "SMS verification window."),
      IpSendLimit: int(1, 20, "SMS sends per client IP and send window."),
      IpVerifyLimit: int(1, 30, "SMS verification attempts per client IP and verify window."),
      Provider: z.enum(["development", "http"]).default("development").meta({
        description: "Global default SMS provider: `development` sends nothing and logs a masked notice.",
      }),
      HttpUrl: z
        .url()
        .optional()
        .meta({ description: "With Provider `http`: the gateway URL (POST `{ to, message }`)." }),
      HttpApiKey: z
        .string()
        .min(1)
        .optional()
        .meta(secret("With Provider `http`: Bearer token for the gateway.")),
    }),
    Mfa: z.object({
      StepTokenSeconds: int(
        30,
        300,
        "How long the `mfaToken` of a sign-in that needs a second factor works (once).",
      ),
      VerifyLimit: int(1, 5, "Second-factor attempts per user and window (sign-in step and step-up)."),
      VerifyWindowSeconds: int(1, 900, "Second-factor attempt window."),
      IpVerifyLimit: int(1, 30, "Second-factor attempts per client IP and window, all users together."),
      StaffGraceDays: int(
        0,
        7,
        "In Production platform staff must have a second factor: days after a staff account is created that it may still sign in without one (then every sign-in asks it to enrol).",
      ),
      StepUpMaxAgeMinutes: int(
        1,
        10,
        "Sensitive operations (password change, API key creation, webhook secret rotation, enrolling or removing a factor, SSO and SCIM configuration) of a user with a second factor need one proved within this many minutes (step-up, RFC 9470).",
      ),
      TrustedDeviceDays: int(
        1,
        30,
        "How long a browser trusted at a sign-in step (`trustDevice: true`) skips the step, where the tenant allows trusted devices; the cookie lives as long.",
      ),
      Issuer: z.string().min(1).max(64).default("Plinth").meta({
        description:
          "The issuer an authenticator app shows beside the account (`otpauth://` URI); the tenant's name is used where there is one.",
      }),
    }),
    SessionCacheSeconds: int(
      0,
      5,
      "How long a process trusts an open session without asking the database (0: ask every request). Ended sessions are evicted at once in every process through NOTIFY; this bounds staleness if a notice is lost.",
    ),
    Password: z.object({
      AttemptLimit: int(
        1,
        5,
        "Password attempts per account from one client address and window; from the 4th each waits 1 s, 2 s… after the previous, at the limit that address is refused for the window. A success from the address clears it.",
      ),
      AttemptWindowSeconds: int(1, 900, "Password attempt window (every password window)."),
      AccountAttemptLimit: int(
        1,
        100,
        "Password attempts per account from all addresses together and window before each further attempt must wait 1 s, 2 s, 4 s… after the previous one (never a hard lock).",
      ),
      AccountMaxDelaySeconds: int(1, 60, "The longest wait between password attempts on one account."),
      IpAttemptLimit: int(1, 50, "Password attempts per client IP and window (all accounts together)."),
    }),
  }),
  Tenancy: z.object({
    DeletionGraceDays: int(
      0,
      30,
      "Days between a platform admin scheduling a tenant's deletion and the deletion (`POST /api/admin/tenants/{id}/deletion` without `graceDays`); it can be canceled until then.",
    ),
    ReservedDays: int(
      0,
      90,
      "Days a deleted tenant's code and custom hostnames stay reserved: no new tenant may take them.",
    ),
    ExportLinkSeconds: z.number().int().min(60).max(604_800).default(3600).meta({
      description:
        "How long the presigned download link of a tenant export works, at most 604800 (a new link with every read of the export).",
    }),
    SignUp: z.object({
      Enabled: flag(
        false,
        "Self-serve sign-up (`POST /api/auth/signup`): a verified address creates a tenant and owns it.",
      ),
      TokenLifetimeMinutes: int(5, 1440, "How long a sign-up verification link works (once)."),
      IpLimit: int(1, 5, "Sign-ups per client IP and window; more answer 429."),
      DomainLimit: int(1, 20, "Sign-ups per address domain (`example.com`) and window; more answer 429."),
      WindowSeconds: int(1, 3600, "Sign-up window."),
    }),
    Resolution: z.object({
      PlatformHost: z.string().min(1).optional().meta({ description: "The official platform host name." }),
      TrustedProxies: strings("Proxies (IP or CIDR) whose `X-Forwarded-*` headers are believed."),
      TenantCodePaths: z.array(z.string()).default(["/api/auth/"]).meta({
        description:
          "Path prefixes on which a tenant code (`X-Tenant`, `?tenant=`, or `tenant` in a sign-in body) is accepted on the platform host; elsewhere it is refused.",
      }),
    }),
  }),
  AllowedHosts: strings("Exact host names accepted in `Host` (no wildcards; port ignored)."),
  Cors: z.object({
    Origins: strings("Origins allowed by CORS (explicit, no `*` with credentials)."),
    Headers: strings("Request headers allowed by CORS."),
    Methods: strings("Methods allowed by CORS."),
    AllowCredentials: flag(false, "Whether CORS responses allow credentials."),
  }),
  BrowserAuth: z.object({
    AllowedOrigins: strings("HTTP(S) origins allowed to use cookie (browser) authentication."),
    SessionHours: int(1, 12, "Lifetime of a browser session cookie."),
    SameSite: z
      .enum(["Strict", "Lax"])
      .default("Strict")
      .meta({ description: "SameSite attribute of the session cookie." }),
  }),
  RateLimiting: z.object({
    Global: z.object({
      PermitLimit: optionalInt(
        1,
        "Requests per client IP and window, or per person for a signed-in caller this process knows (required in Production; 600 outside it when unset).",
      ),
      WindowSeconds: optionalInt(1, "Global rate-limit window (required in Production; 60 outside it)."),
    }),
    Auth: z.object({
      PermitLimit: optionalInt(
        1,
        "Authentication requests per client IP and window (required in Production; 30 outside it).",
      ),
      WindowSeconds: optionalInt(
        1,
        "Authentication rate-limit window (required in Production; 60 outside it).",
      ),
    }),
    ApiKey: z.object({
      PermitLimit: int(
        1,
        600,
        "Requests per tenant API key and window, whatever the client address (docs/api-keys.md).",
      ),
      WindowSeconds: int(1, 60, "Per-API-key rate-limit window."),
    }),
    Tenant: z.object({
      Enabled: flag(
        true,
        "Limits each tenant's requests to `/api/tenant/*` to its plan's `rate_limit_per_minute` (docs/billing.md).",
      ),
      PlanSeconds: int(
        1,
        10,
        "How long an API process holds a tenant's rate from its plan before reading it again.",
      ),
    }),
    WebhookTest: z.object({
      EndpointPermitLimit: int(
        1,
        5,
        "Test sends (`POST /api/tenant/webhooks/{id}/test`) per webhook endpoint and window (docs/webhooks.md).",
      ),
      TenantPermitLimit: int(1, 20, "Test sends per tenant and window, all its endpoints together."),
      WindowSeconds: int(1, 60, "The test-send limits' window."),
    }),
  }),
};
