import { z } from "zod";

/**
 * The one configuration schema: every key Plinth reads, its type and default. Key names are a
 * contract for operators (`Section:Key` in JSON, `Section__Key` in the environment).
 * `secret: true` in the metadata marks values that are never printed; docs/configuration.md is
 * generated from this file (`bun run docs:config`) and CI checks that the two agree.
 */

import { emailSection } from "./schema-email.ts";
import { flag, int, secret, strings } from "./schema-fields.ts";
import { securitySections } from "./schema-security.ts";
import { auditCheckpointsSection, storageSection } from "./schema-storage.ts";

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
    DatabaseDirect: z
      .string()
      .min(1)
      .optional()
      .meta(
        secret(
          "Direct (session) PostgreSQL URL beside a transaction pooler: LISTEN, session advisory locks and the migrator use it. Wins over DATABASE_DIRECT_URL.",
        ),
      ),
    Cache: z
      .string()
      .min(1)
      .optional()
      .meta(
        secret(
          "Cache URL: `redis://`, `rediss://`, a Redis Cluster `redis://h1:p1,h2:p2,h3:p3?cluster=true`, or Upstash REST `https://`. Wins over CACHE_URL.",
        ),
      ),
    CacheToken: z
      .string()
      .min(1)
      .optional()
      .meta(
        secret(
          "Upstash REST token when the `https://` cache URL carries none as its password (also `CACHE_TOKEN`).",
        ),
      ),
  }),
  Cache: z.object({
    KeyPrefix: z
      .string()
      .regex(/^[A-Za-z0-9:_.-]{1,64}$/, "letters, digits and `: _ . -`, at most 64")
      .optional()
      .meta({
        description:
          "Prefix of every key Plinth writes to the cache (a `:` follows it); default `plinth:<environment>` (lower case). Give each install that shares one Redis its own, e.g. `plinth:acme-production`.",
      }),
    CommandTimeoutMs: int(
      50,
      1_000,
      "Time limit of one cache command; a slower cache counts as unreachable.",
    ),
    TenantFeaturesSeconds: int(1, 300, "How long a tenant's effective features stay cached."),
    OutputCacheSeconds: int(1, 60, "Default lifetime of an HTTP output-cache entry (Production)."),
    OutputCacheEnabled: z
      .boolean()
      .optional()
      .meta({ description: "HTTP output cache for opted-in anonymous GETs; default on in Production only." }),
  }),
  Database: z.object({
    PoolSize: int(1, 10, "PostgreSQL connections per process."),
    PoolMode: z.enum(["session", "transaction"]).default("session").meta({
      description:
        "`transaction` when ConnectionStrings:Database goes through a transaction pooler (PgBouncer `pool_mode = transaction`): no named prepared statements, no session state through the pool; LISTEN and session locks go through ConnectionStrings:DatabaseDirect.",
    }),
    AppRole: z
      .string()
      .regex(/^[a-z_][a-z0-9_]{0,62}$/, "a plain role name: lower-case letters, digits and `_`")
      .default("plinth_app")
      .meta({
        description:
          'The role the API should connect as, held by row-level security (no superuser, no BYPASSRLS, owns nothing). `bun run migrate` creates it where the migrator may (CREATEROLE), else checks it, and grants it every table (docs/deployment.md, "The database roles").',
      }),
    AppRolePassword: z
      .string()
      .min(1)
      .optional()
      .meta(
        secret(
          "Password `bun run migrate` gives Database:AppRole when it creates the role (never changed afterwards).",
        ),
      ),
    AnswerTimeoutSeconds: int(
      0,
      30,
      "Longest a statement waits for the database's next byte before its connection is taken for dead and closed (the request gets 503): a network that drops packets silently (a failover, a partition) otherwise holds it ~15 min or for ever. Set it above the longest statement the API or a job runs; 0: no bound. The LISTEN connection is checked every 10 s within the same bound.",
    ),
    SlowQueryMilliseconds: int(
      1,
      200,
      "Statements at least this slow are logged at warn (statement shape and duration, never parameter values).",
    ),
  }),
  Server: z.object({
    Port: z
      .number()
      .int()
      .min(0)
      .max(65_535)
      .default(8080)
      .meta({ description: "HTTP port (also `PORT`, which wins); 0 picks a free one." }),
    MaxBodyBytes: int(1, 1_048_576, "Largest request body accepted, in bytes; larger bodies get 413."),
    ShutdownTimeoutSeconds: int(
      1,
      25,
      "On SIGTERM, how long in-flight requests and jobs may run before the process exits.",
    ),
    PublicBaseUrl: z
      .url({ protocol: /^https?$/ })
      .nullable()
      .default(null)
      .meta({
        description:
          "The API's public base URL (`https://api.example.com`), the `servers` entry of the OpenAPI document; unset: the origin the document is requested at.",
      }),
    ReusePort: flag(
      false,
      "Share the port with other processes (SO_REUSEPORT, Linux). Off: a second API on a port already served fails at start with `EADDRINUSE`.",
    ),
  }),
  Configuration: z.object({
    AllowUnknownKeys: flag(
      false,
      "In Production, start despite unknown keys in settings files or `Section__Key` variables (they are then only warned about).",
    ),
  }),
  Logging: z.object({
    Level: z.enum(["debug", "info", "warn", "error"]).default("info").meta({
      description:
        "Lowest log level written. A health probe that passed logs its request line at debug (docs/observability.md).",
    }),
  }),
  BackgroundProcessing: z.object({
    Enabled: flag(true, "Master switch: `false` stops all the background loops (tests, maintenance)."),
    JobPollSeconds: int(1, 2, "Idle poll interval of the job loop."),
    JobParallelism: int(1, 4, "Jobs run at once per process."),
    JobBatchSize: int(1, 5, "Jobs claimed per query."),
    JobLocalQueueSize: int(
      0,
      0,
      "Jobs a process may claim ahead of its free slots (held under lease, started without a round trip; at most about 50 ms of work at the recent mean run time). 0: a claimed job is a running job. For floods of short jobs: see docs/jobs.md.",
    ),
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
    SchedulesEnabled: flag(
      true,
      "Enqueues the due slots of the recurring schedules (`job_schedules`); the master switch `Enabled` must be on too.",
    ),
    MaxCatchUpRuns: int(
      1,
      100,
      "Most runs a schedule with `catchUp` `all` enqueues for the slots it missed during downtime (the latest ones).",
    ),
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
    DeniedSuffixes: strings(
      "Hostnames (and their subdomains) no tenant may claim, in addition to the built-in list (localhost, .local, .internal, .localdomain, .svc, .cluster.local, .arpa, loopback wildcard-DNS names); lower case, IDNs in their xn-- form.",
    ),
    ClaimExpiryDays: int(
      1,
      14,
      "Days a Pending or Failed domain claim is kept; then it is removed (and its custom_domains usage given back).",
    ),
    GatewayBaseUrl: z
      .url()
      .nullable()
      .default(null)
      .meta({ description: "TLS gateway API base (Cloudflare custom hostnames zone URL)." }),
    GatewayApiKey: z.string().nullable().default(null).meta(secret("Bearer token for the TLS gateway.")),
    DnsTimeoutMs: int(100, 5000, "Timeout of one DNS-over-HTTPS query."),
    GatewayTimeoutMs: int(100, 10000, "Timeout of one TLS gateway request."),
    GatewayRetries: int(
      0,
      2,
      "Extra attempts of a gateway request after a timeout, a network error, 429 or 5xx.",
    ),
    LeaseSeconds: int(
      10,
      120,
      "How long a process holds a claimed domain; another process takes it over after that.",
    ),
    RetryBaseSeconds: int(
      1,
      60,
      "Delay before re-checking a domain after its first failed check; each further failure doubles it.",
    ),
    RetryMaxSeconds: int(1, 3600, "Upper bound of the re-check delay of a failed domain."),
  }),
  SaasSubscriptions: z.object({
    Enabled: flag(true, "Runs the subscription loop."),
    BatchSize: int(1, 100, "Subscriptions handled per tick."),
    PastDueGraceDays: int(0, 7, "Days a past-due subscription keeps its features before suspension."),
    PollSeconds: int(1, 60, "Interval of the subscription loop (not in the spec; Plinth's choice)."),
    WebhookToleranceSeconds: int(
      1,
      300,
      "How far a payment webhook's signed timestamp may be from now before it is refused as a replay.",
    ),
  }),
  FeatureUsageReconciliation: z.object({
    Enabled: flag(true, "Runs the feature-usage reconciliation loop."),
    BatchSize: int(1, 100, "Usage counters (tenant × feature × period) reconciled per batch."),
    IntervalMinutes: int(1, 60, "Interval of the reconciliation loop."),
    CountApiCalls: flag(
      true,
      "Counts each request to the tenant API (`/api/tenant/*`) as `api_calls` and refuses them past the plan's monthly limit (docs/billing.md).",
    ),
    ApiCallsFlushSeconds: int(
      1,
      10,
      "How often an API process writes its `api_calls` counts to the usage ledger.",
    ),
  }),
  Webhooks: z.object({
    RetrySeconds: z.array(z.number().int().min(0)).default([5, 300, 1800, 7200, 18000, 36000, 36000]).meta({
      description:
        "Delays in seconds before each retry of a failed webhook delivery (the first attempt is immediate); its length is the number of retries.",
    }),
    TimeoutSeconds: int(1, 15, "Total time limit of one delivery attempt (connect, send, read the answer)."),
    DisableAfterDays: int(
      1,
      5,
      "An endpoint whose attempts have failed without a success for this many days is disabled (a `webhook.endpoint_disabled` event says so).",
    ),
    LogRetentionDays: int(
      1,
      30,
      "Days the delivery log (events, deliveries, attempts) is kept; older finished rows are pruned daily.",
    ),
    AllowPrivateDestinations: flag(
      false,
      "Lets endpoints point at loopback, private, link-local, CGNAT, unique-local and metadata addresses (tests with local receivers). Meant for development and tests; Production still requires `https`.",
    ),
    TrustedCaFile: z.string().min(1).optional().meta({
      description:
        "A PEM file of CA certificates that deliveries trust beside the system roots (a local receiver with a self-signed or development-CA certificate). Read at start; an unreadable file or one without a certificate stops the start.",
    }),
  }),
  Sso: z.object({
    AllowPrivateProviders: flag(
      false,
      "Lets an OIDC issuer (its discovery document, JWKS, token and userinfo endpoints) and a SAML `metadataUrl` be on loopback, private, link-local, CGNAT, unique-local and metadata addresses (tests and development with a local identity provider). Meant for development and tests; Production still requires `https`.",
    ),
    EmailDomainRecheckHours: int(
      1,
      24,
      "How often the tenant-domain loop re-checks the TXT record of each verified e-mail domain (docs/sso.md).",
    ),
    EmailDomainGraceDays: int(
      0,
      7,
      "How long a verified e-mail domain stays verified after a re-check found its TXT record gone; then it turns `failed` (0: at the first such re-check).",
    ),
  }),
  ...securitySections,
  Audit: z.object({
    RetentionDays: int(
      1,
      365,
      "Audit events older than this many days are pruned, whole prefixes of each chain (docs/audit.md).",
    ),
    FailuresPerMinute: int(
      1,
      10,
      "Failed sign-ins and refused authorizations recorded per tenant and client address per minute; more are not recorded.",
    ),
    FailuresPerTenantPerMinute: int(
      1,
      120,
      "Failed sign-ins and refused authorizations recorded per tenant (or the platform) per minute, all addresses together.",
    ),
    ExportBatchSize: z.number().int().min(1).max(10_000).default(1000).meta({
      description:
        "Rows read per round trip while an audit export streams NDJSON (at most 10,000: memory holds one batch).",
    }),
    Checkpoints: auditCheckpointsSection,
  }),
  Storage: storageSection,
  Email: emailSection,
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
    MetricExportSeconds: int(1, 15, "Interval between metric exports to the collector."),
    SampleRatio: z.number().min(0).max(1).default(1).meta({
      description:
        "Share of new traces recorded (0–1); a request continuing a caller's trace follows the caller's decision.",
    }),
    Prometheus: z.object({
      Port: z.number().int().min(1).max(65_535).optional().meta({
        description:
          "Port of a separate listener serving `GET /metrics` in the Prometheus text format (OpenTelemetry's Prometheus exporter); unset, there is none. Never the API's own listener: equal to `Server:Port` it is refused.",
      }),
      Host: z.string().min(1).default("127.0.0.1").meta({
        description:
          "Address the `/metrics` listener binds to; the loopback default keeps it off the network (`0.0.0.0` only behind a firewall or in a private network).",
      }),
    }),
  }),
  Bootstrap: z.object({
    PlatformAdminEmail: z.string().optional().meta({
      description: "First platform administrator's e-mail (`PLINTH_BOOTSTRAP_PLATFORM_ADMIN_EMAIL`).",
    }),
    PlatformAdminPassword: z
      .string()
      .optional()
      .meta(
        secret(
          "Temporary password, at least 12 characters and hard to guess (zxcvbn score 3 of 4; `PLINTH_BOOTSTRAP_PLATFORM_ADMIN_PASSWORD`).",
        ),
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
  // the provider family (spec 2.3: a second prefix named after the default provider); the
  // STORAGE_* names below win where both are set
  S3_BUCKET: "Storage:S3:Bucket",
  S3_REGION: "Storage:S3:Region",
  S3_ENDPOINT: "Storage:S3:Endpoint",
  S3_FORCE_PATH_STYLE: "Storage:S3:ForcePathStyle",
  S3_ACCESS_KEY_ID: "Storage:S3:AccessKeyId",
  S3_SECRET_ACCESS_KEY: "Storage:S3:SecretAccessKey",
  STORAGE_PROVIDER: "Storage:Provider",
  STORAGE_ALLOWED_MIME_TYPES: "Storage:AllowedMimeTypes",
  STORAGE_PRESIGN_SECONDS: "Storage:PresignSeconds",
  STORAGE_MAX_UPLOAD_BYTES: "Storage:MaxUploadBytes",
  STORAGE_BUCKET: "Storage:S3:Bucket",
  STORAGE_REGION: "Storage:S3:Region",
  STORAGE_ENDPOINT: "Storage:S3:Endpoint",
  STORAGE_FORCE_PATH_STYLE: "Storage:S3:ForcePathStyle",
  STORAGE_ACCESS_KEY_ID: "Storage:S3:AccessKeyId",
  STORAGE_SECRET_ACCESS_KEY: "Storage:S3:SecretAccessKey",
};
