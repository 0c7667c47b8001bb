import { z } from "zod";

/**
 * The one configuration schema: every key Plinth reads, its type and default. Key names are a
 * contract for operators (`Section:Key` in JSON, `Section__Key` in the environment).
 * `secret: true` in the metadata marks values that are never printed; docs/configuration.md is
 * generated from this file (`bun run docs:config`) and CI checks that the two agree.
 */

const secret = (description: string) => ({ description, secret: true });

const int = (min: number, fallback: number, description: string) =>
  z.number().int().min(min).default(fallback).meta({ description });
const optionalInt = (min: number, description: string) =>
  z.number().int().min(min).optional().meta({ description });
const flag = (fallback: boolean, description: string) => z.boolean().default(fallback).meta({ description });
const strings = (description: string) => z.array(z.string()).default([]).meta({ description });

export const environments = ["Development", "Staging", "Production"] as const;
export type Environment = (typeof environments)[number];

export const configSchema = z.object({
  ConnectionStrings: z.object({
    Database: z
      .string()
      .min(1)
      .optional()
      .meta(
        secret(
          "PostgreSQL URL (`postgres://…`) or embedded PGlite (`pglite:memory:`, `pglite:./dir`). Wins over DATABASE_URL.",
        ),
      ),
    Cache: z
      .string()
      .min(1)
      .optional()
      .meta(secret("Cache URL: `redis://`, `rediss://` or Upstash REST `https://`. Wins over CACHE_URL.")),
  }),
  Database: z.object({
    PoolSize: int(1, 10, "PostgreSQL connections per process."),
  }),
  Server: z.object({
    Port: int(0, 8080, "HTTP port (also `PORT`, which wins)."),
    MaxBodyBytes: int(1, 1_048_576, "Largest request body accepted, in bytes; larger bodies get 413."),
    ShutdownTimeoutSeconds: int(
      1,
      25,
      "On SIGTERM, how long in-flight requests and jobs may run before the process exits.",
    ),
  }),
  Logging: z.object({
    Level: z
      .enum(["debug", "info", "warn", "error"])
      .default("info")
      .meta({ description: "Lowest log level written." }),
  }),
  BackgroundProcessing: z.object({
    Enabled: flag(true, "Master switch: `false` stops all four background loops (tests, maintenance)."),
    JobPollSeconds: int(1, 2, "Idle poll interval of the job loop."),
    JobParallelism: int(1, 4, "Jobs run at once per process."),
    JobBatchSize: int(1, 5, "Jobs claimed per query."),
    JobsEnabled: flag(true, "Runs the job loop (the master switch `Enabled` must be on too)."),
    JobMaxAttempts: int(1, 10, "Attempts a job gets unless it is enqueued with its own `maxAttempts`."),
    JobRetryBaseSeconds: int(
      1,
      5,
      "Delay before the first retry; each further retry doubles it (±20% jitter).",
    ),
    JobRetryMaxSeconds: int(1, 3600, "Upper bound of the retry delay."),
    JobRetentionDays: int(1, 7, "Succeeded jobs are deleted this many days after they finished."),
    JobDeadRetentionDays: int(1, 30, "Dead jobs stay inspectable this many days, then are deleted."),
  }),
  TenantDomains: z.object({
    Enabled: flag(true, "Runs the tenant-domain verification loop."),
    PollSeconds: int(1, 60, "Interval of the tenant-domain loop."),
    BatchSize: int(1, 50, "Domains checked per tick."),
    DnsJsonEndpoint: z
      .url()
      .default("https://cloudflare-dns.com/dns-query")
      .meta({ description: "DNS-over-HTTPS JSON resolver (`application/dns-json`)." }),
    VerificationRecordPrefix: z
      .string()
      .min(1)
      .default("_plinth-verification")
      .meta({ description: "TXT record name prefix: `<prefix>.<hostname>`." }),
    AllowedCnameTargets: strings("CNAME targets a custom domain may point at."),
    GatewayBaseUrl: z
      .url()
      .nullable()
      .default(null)
      .meta({ description: "TLS gateway API base (Cloudflare custom hostnames zone URL)." }),
    GatewayApiKey: z.string().nullable().default(null).meta(secret("Bearer token for the TLS gateway.")),
  }),
  SaasSubscriptions: z.object({
    Enabled: flag(true, "Runs the subscription loop."),
    BatchSize: int(1, 100, "Subscriptions handled per tick."),
    PastDueGraceDays: int(0, 7, "Days a past-due subscription keeps its features before suspension."),
  }),
  FeatureUsageReconciliation: z.object({
    Enabled: flag(true, "Runs the feature-usage reconciliation loop."),
    BatchSize: int(1, 100, "Tenants reconciled per batch."),
    IntervalMinutes: int(1, 60, "Interval of the reconciliation loop."),
  }),
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
    }),
  }),
  Authentication: z.object({
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
    }),
    Password: z.object({
      AttemptLimit: int(1, 5, "Failed password attempts per account and window."),
      AttemptWindowSeconds: int(1, 900, "Password attempt window."),
    }),
  }),
  Tenancy: z.object({
    Resolution: z.object({
      PlatformHost: z.string().min(1).optional().meta({ description: "The official platform host name." }),
      TrustedProxies: strings("Proxies (IP or CIDR) whose `X-Forwarded-*` headers are believed."),
      TenantCodePaths: strings("Path prefixes on which a tenant code is accepted on the platform host."),
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
  }),
  RateLimiting: z.object({
    Global: z.object({
      PermitLimit: optionalInt(1, "Requests per client IP and window (required in Production)."),
      WindowSeconds: optionalInt(1, "Global rate-limit window (required in Production)."),
    }),
    Auth: z.object({
      PermitLimit: optionalInt(
        1,
        "Authentication requests per client IP and window (required in Production).",
      ),
      WindowSeconds: optionalInt(1, "Authentication rate-limit window (required in Production)."),
    }),
  }),
  OpenTelemetry: z.object({
    OtlpEndpoint: z
      .url()
      .optional()
      .meta({ description: "OTLP/HTTP collector base URL; unset, nothing is exported." }),
    ServiceName: z
      .string()
      .min(1)
      .default("plinth")
      .meta({ description: "`service.name` of exported telemetry." }),
  }),
  Bootstrap: z.object({
    PlatformAdminEmail: z.string().optional().meta({
      description: "First platform administrator's e-mail (`PLINTH_BOOTSTRAP_PLATFORM_ADMIN_EMAIL`).",
    }),
    PlatformAdminPassword: z
      .string()
      .optional()
      .meta(
        secret("Temporary password, at least 12 characters (`PLINTH_BOOTSTRAP_PLATFORM_ADMIN_PASSWORD`)."),
      ),
    PlatformAdminName: z
      .string()
      .optional()
      .meta({ description: "Display name (`PLINTH_BOOTSTRAP_PLATFORM_ADMIN_NAME`)." }),
  }),
});

export type Settings = z.output<typeof configSchema>;

/** Environment variables that override one key each, above every other source. */
export const environmentOverrides: Record<string, string> = {
  PLINTH_DATA_PROTECTION_APPLICATION_NAME: "Security:DataProtection:ApplicationName",
  PLINTH_DATA_PROTECTION_CERTIFICATE_PATH: "Security:DataProtection:CertificatePath",
  PLINTH_DATA_PROTECTION_CERTIFICATE_PASSWORD: "Security:DataProtection:CertificatePassword",
  PLINTH_TENANT_SECRET_KEY_ID: "Security:TenantSecrets:KeyId",
  PLINTH_TENANT_SECRET_MASTER_KEY: "Security:TenantSecrets:MasterKey",
  PLINTH_SMS_CODE_PEPPER: "Authentication:Sms:CodePepper",
  PLINTH_BOOTSTRAP_PLATFORM_ADMIN_EMAIL: "Bootstrap:PlatformAdminEmail",
  PLINTH_BOOTSTRAP_PLATFORM_ADMIN_PASSWORD: "Bootstrap:PlatformAdminPassword",
  PLINTH_BOOTSTRAP_PLATFORM_ADMIN_NAME: "Bootstrap:PlatformAdminName",
  PORT: "Server:Port",
};
