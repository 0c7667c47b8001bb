import { AuditSuppressions } from "./audit/suppressions.ts";
import { opaqueToken } from "./auth/opaque-tokens.ts";
import { SessionCache } from "./auth/session-cache.ts";
import { developmentSmsSender, httpSmsSender, type SmsSender, tenantAwareSmsSender } from "./auth/sms.ts";
import { createTokenService, type TokenService } from "./auth/tokens.ts";
import { type Cache, createCache } from "./cache/index.ts";
import { type Clock, systemClock } from "./clock.ts";
import type { AppConfig } from "./config/load.ts";
import { systemCtx } from "./context.ts";
import { type Database, openDatabase } from "./db/client.ts";
import { withDatabase } from "./db/operation.ts";
import { templateDir } from "./db/pglite-template.ts";
import { createSchemaGate, type SchemaGate } from "./db/schema-gate.ts";
import { type EmailProviders, platformEmailProvider, tenantAwareEmailProviders } from "./email/providers.ts";
import { LoopStatusBoard } from "./loops/loop-status.ts";
import { PendingTasks } from "./pending.ts";
import { readProviderSecrets, resolveProvider } from "./providers/tenant-providers.ts";
import { createRedactor, type Redactor } from "./redact.ts";
import {
  type CounterStore,
  cacheCounterStore,
  databaseCounterStore,
  memoryCounterStore,
} from "./security/counter-store.ts";
import { createDataProtection, type DataProtection } from "./security/data-protection.ts";
import { checkKeyBindings } from "./security/key-fingerprints.ts";
import { parseTenantSecretKeys, type TenantSecretKeyring } from "./security/tenant-secrets.ts";
import { createSecurityWindows, type SecurityWindows } from "./security/windows.ts";
import { createObjectStorage, type ObjectStorage } from "./storage/object-storage.ts";
import { createQueryObserver } from "./telemetry/db.ts";
import { type Fetch, tracedFetch } from "./telemetry/fetch.ts";
import { bufferedLines, createLogger, type Logger } from "./telemetry/logger.ts";
import { disabledTelemetry, type Telemetry } from "./telemetry/otel.ts";
import { createTenantLookup, type TenantLookup } from "./tenancy/tenant-lookup.ts";
import { ApiCallMeter } from "./usage/api-calls.ts";
import { type HostResolver, systemResolver } from "./webhooks/destinations.ts";

/** Everything the app, the loops and domain functions need, built once per process. */
export interface Deps {
  config: AppConfig;
  redactor: Redactor;
  logger: Logger;
  database: Database;
  /** The migrations this code ships against those applied (src/db/schema-gate.ts). */
  schema: SchemaGate;
  cache: Cache | null;
  /** Security-window and rate-limit counters: the cache, or the database when none is configured. */
  counters: CounterStore;
  windows: SecurityWindows;
  clock: Clock;
  tokens: TokenService;
  /** The global default SMS provider (tenant providers override it). */
  sms: SmsSender;
  /** The e-mail provider of each message: a tenant's own `notification` provider, else `Email:*`. */
  emailProviders: EmailProviders;
  /** HMAC key for SMS codes: `Authentication:Sms:CodePepper`, or an ephemeral one in Development. */
  smsPepper: string;
  tenants: TenantLookup;
  /** Open sessions recently seen (auth/session-cache.ts). */
  sessionCache: SessionCache;
  /** Keys of tenant secrets (`Security:TenantSecrets`), parsed once; null when not configured. */
  tenantSecretKeyring: TenantSecretKeyring | null;
  /** Key ring protecting data at rest (browser session cookies and the like). */
  dataProtection: DataProtection;
  /** Traces and metrics (`OpenTelemetry:*`); no-ops when no endpoint is configured. */
  telemetry: Telemetry;
  /** `fetch` for outgoing calls: a client span and `traceparent` when telemetry is on. */
  fetch: Fetch;
  /** Work requests start without waiting for (SMS sends); shutdown and tests await it. */
  pending: PendingTasks;
  /** Tenants' object storage (`Storage:S3:*`); null when no bucket is configured. */
  storage: ObjectStorage | null;
  /** Each interval loop's last tick and last error in this process (the console shows them). */
  loopStatus: LoopStatusBoard;
  /** Resolves webhook destinations (the addresses checked are the ones connected to). */
  hostResolver: HostResolver;
  /** The audit rows this process's failure limiter dropped, per key: one log line a window (audit/suppressions.ts). */
  auditSuppressions: AuditSuppressions;
  /** `api_calls` counted in process and written to the usage ledger in batches (src/usage/api-calls.ts). */
  apiCalls: ApiCallMeter;
  /**
   * The key bindings as start-up read them (`checkKeyBindings`, which writes nothing): the key ids
   * not recorded yet, recorded by src/start-up-gates.ts once its gates pass; null when the database
   * did not answer or was not migrated yet: the gates check and record them once it is current.
   */
  keyBindings: { unrecorded: string[] } | null;
}

export interface CreateDepsOptions {
  /** Tests hand in their own database, clock or log sink. */
  database?: Database;
  clock?: Clock;
  /** Tests isolate their cache keys with their own prefix. */
  cachePrefix?: string;
  /** Tests share one in-process store between two app instances. */
  counters?: CounterStore;
  logWrite?: (line: string) => void;
  /** Tests and benchmarks record spans in process (see src/telemetry/otel.ts). */
  telemetry?: Telemetry;
  /** Tests hand in their own object storage (null: none), instead of the one `Storage:S3:*` describes. */
  storage?: ObjectStorage | null;
  /** Tests make host names resolve where they need (webhook destinations). */
  hostResolver?: HostResolver;
}

/** The SMS code pepper; outside Production an ephemeral one when none is set (logged). */
function smsPepperOf(config: AppConfig, logger: Logger): string {
  const pepper = config.settings.Authentication.Sms.CodePepper ?? "";
  if (pepper.length >= 32) return pepper;
  if (config.environment === "Production")
    throw new Error("Authentication:Sms:CodePepper is required in Production");
  logger.warn(
    "Authentication:Sms:CodePepper is not set: using an ephemeral pepper; SMS codes die with this process and no other replica accepts them",
    { environment: config.environment },
  );
  return opaqueToken(32);
}

/** What the tenant-aware senders (SMS, e-mail) are built from. */
type ProviderParts = {
  database: Database;
  keyring: TenantSecretKeyring | null;
  logger: Logger;
  fetch: Fetch;
};

/** A tenant provider's secrets, read in its tenant's context (refused without Security:TenantSecrets). */
function providerSecretsOf(parts: ProviderParts) {
  return async (provider: Parameters<typeof readProviderSecrets>[2]) => {
    const { keyring } = parts;
    if (!keyring)
      throw new Error("Security:TenantSecrets is not configured: tenant provider secrets cannot be read");
    return withDatabase(parts, systemCtx("provider secrets", provider.tenantId), (db) =>
      readProviderSecrets(db, keyring, provider),
    );
  };
}

/** The SMS sender: a tenant's own provider where it has one, else the configured global sender. */
function smsSenderOf(config: AppConfig, parts: ProviderParts) {
  const { logger, fetch } = parts;
  const sms = config.settings.Authentication.Sms;
  const globalSms =
    sms.Provider === "http" && sms.HttpUrl && sms.HttpApiKey
      ? httpSmsSender({ url: sms.HttpUrl, apiKey: sms.HttpApiKey, logger, fetch })
      : developmentSmsSender(logger);
  return tenantAwareSmsSender({
    global: globalSms,
    resolve: (tenantId) =>
      withDatabase(parts, systemCtx("sms", tenantId), (db) =>
        resolveProvider(db, tenantId, "sms", { provider: sms.Provider, settings: {} }),
      ),
    secrets: providerSecretsOf(parts),
    logger,
    fetch,
  });
}

/** The e-mail providers: a tenant's own `notification` provider where it has one, else the platform's. */
function emailProvidersOf(config: AppConfig, parts: ProviderParts): EmailProviders {
  const { logger, fetch } = parts;
  const settings = config.settings.Email;
  const platform = platformEmailProvider({
    settings,
    environment: config.environment,
    trustedCa: config.emailTrustedCa,
    logger,
    fetch,
  });
  if (platform.name === "none")
    logger.warn("no e-mail provider is configured (Email:Smtp:Host or Email:Http:Url): messages will fail", {
      environment: config.environment,
    });
  return tenantAwareEmailProviders({
    platform,
    resolve: (tenantId) =>
      withDatabase(parts, systemCtx("email", tenantId), (db) =>
        resolveProvider(db, tenantId, "notification", { provider: platform.name, settings: {} }),
      ),
    secrets: providerSecretsOf(parts),
    logger,
    fetch,
    timeoutMs: settings.TimeoutSeconds * 1000,
    trustedCa: config.emailTrustedCa,
  });
}

/** The tenant-secret keyring; its data-key cache hears of keys destroyed or re-wrapped by other processes. */
async function tenantKeyringOf(
  config: AppConfig,
  database: Database,
  logger: Logger,
  clock: Clock,
): Promise<TenantSecretKeyring | null> {
  const keyring = parseTenantSecretKeys(config.settings.Security.TenantSecrets, clock).keyring ?? null;
  await keyring?.dataKeys.listen(database, logger);
  return keyring;
}

/** Telemetry as `OpenTelemetry:*` asks: off (no-ops) with neither an endpoint nor a Prometheus port. */
async function telemetryOf(config: AppConfig, logger: Logger): Promise<Telemetry> {
  const otel = config.settings.OpenTelemetry;
  // the SDK is imported only when something is exported
  return otel.OtlpEndpoint || otel.Prometheus.Port
    ? (await import("./telemetry/sdk.ts")).createTelemetry({
        endpoint: otel.OtlpEndpoint,
        prometheus: otel.Prometheus.Port
          ? {
              host: otel.Prometheus.Host,
              port: otel.Prometheus.Port,
              onError: (error) => logger.error("the Prometheus /metrics listener failed", { error }),
            }
          : undefined,
        serviceName: otel.ServiceName,
        environment: config.environment,
        metricIntervalMs: otel.MetricExportSeconds * 1000,
        sampleRatio: otel.SampleRatio,
      })
    : disabledTelemetry();
}

export async function createDeps(config: AppConfig, options: CreateDepsOptions = {}): Promise<Deps> {
  const redactor = createRedactor(config.secretValues);
  // a serving process writes its log lines once per event-loop turn; tests read them line by line
  const sink = options.logWrite ? { write: options.logWrite, flush: undefined } : bufferedLines();
  const logger = createLogger({ level: config.settings.Logging.Level, redactor, ...sink });
  logConfigWarnings(config, logger);
  const telemetry = options.telemetry ?? (await telemetryOf(config, logger));
  const fetch = tracedFetch(telemetry);
  const database =
    options.database ??
    (await openDatabase(config.database.url, {
      poolSize: config.settings.Database.PoolSize,
      answerTimeoutSeconds: config.settings.Database.AnswerTimeoutSeconds,
      applicationName: "plinth",
      poolMode: config.database.poolMode,
      directUrl: config.database.directUrl,
      pgliteTemplate: config.database.url.startsWith("pglite:") ? templateDir() : undefined,
    }));
  database.setQueryObserver(
    createQueryObserver({ telemetry, logger, slowQueryMs: config.settings.Database.SlowQueryMilliseconds }),
  );
  const cache = config.cache
    ? createCache(config.cache.url, {
        environment: config.environment,
        keyPrefix: config.settings.Cache.KeyPrefix,
        logger,
        token: config.cache.token,
        prefix: options.cachePrefix,
        commandTimeoutMs: config.settings.Cache.CommandTimeoutMs,
        clock: options.clock,
      })
    : null;
  // No silent downgrade: a configured cache is the only store, even while it is unreachable
  // (callers then fail closed). Without one (never in Production) the database keeps the counters,
  // or this process's memory on embedded PGlite, which only one process can open.
  const counters =
    options.counters ??
    (cache
      ? cacheCounterStore(cache)
      : database.driver === "pglite"
        ? memoryCounterStore()
        : databaseCounterStore(database.db));
  if (!cache) {
    logger.warn("no cache configured: security windows and rate limits are not shared through a cache", {
      environment: config.environment,
      counters: counters.kind,
    });
  }
  const clock = options.clock ?? systemClock;
  const windows = createSecurityWindows({ store: counters, settings: config.settings, clock, logger });
  const tokens = await createTokenService(config, clock, logger);
  const smsPepper = smsPepperOf(config, logger);
  const keyring = await tenantKeyringOf(config, database, logger, clock);
  const smsSender = smsSenderOf(config, { database, keyring, logger, fetch });
  const emailProviders = emailProvidersOf(config, { database, keyring, logger, fetch });
  const tenants = createTenantLookup(database.db, clock);
  const dataProtection = createDataProtection(config, { db: database.db, clock, logger });
  const keyBindings = await keyBindingsAtStart(config, { database, keyring, dataProtection, logger });
  const sessionSeconds = config.settings.Authentication.SessionCacheSeconds;
  const sessionCache = new SessionCache({ ttlMs: sessionSeconds * 1000, clock });
  if (sessionSeconds > 0) await sessionCache.listen(database, logger);
  return {
    config,
    redactor,
    logger,
    database,
    schema: createSchemaGate(database.db),
    cache,
    counters,
    windows,
    clock,
    tokens,
    sms: smsSender,
    emailProviders,
    smsPepper,
    tenants,
    tenantSecretKeyring: keyring,
    dataProtection,
    sessionCache,
    telemetry,
    fetch,
    pending: new PendingTasks(logger),
    loopStatus: new LoopStatusBoard({ now: () => clock.now(), redact: redactor.text }),
    storage:
      options.storage === undefined ? createObjectStorage(config, { clock, telemetry }) : options.storage,
    hostResolver: options.hostResolver ?? systemResolver,
    auditSuppressions: new AuditSuppressions(),
    apiCalls: new ApiCallMeter(
      { database, cache, clock, logger },
      config.settings.FeatureUsageReconciliation.ApiCallsFlushSeconds,
    ),
    keyBindings,
  };
}

export async function closeDeps(deps: Deps): Promise<void> {
  // the last api_calls counts, while the database is open
  await deps.apiCalls.stop().catch(() => {});
  await Promise.allSettled([deps.database.close(), deps.cache?.close(), deps.telemetry.shutdown()]);
}

/** Unknown keys outside Production (or with Configuration:AllowUnknownKeys): one warning each. */
export function logConfigWarnings(config: AppConfig, logger: Logger): void {
  for (const warning of config.warnings)
    logger.warn(`configuration: ${warning.key} ${warning.problem}`, { environment: config.environment });
}

/**
 * The key bindings at start-up (src/security/key-fingerprints.ts), read only: Production refuses to
 * start on a problem (throws, naming key ids, never keys); elsewhere each is a warning. Returns the
 * key ids not recorded yet (src/start-up-gates.ts records them once the role and the schema pass, so
 * a refused start records nothing); null: not checked (the database did not answer, or is not
 * migrated yet), the gates check them once it is.
 */
async function keyBindingsAtStart(
  config: AppConfig,
  parts: {
    database: Database;
    keyring: TenantSecretKeyring | null;
    dataProtection: DataProtection;
    logger: Logger;
  },
): Promise<{ unrecorded: string[] } | null> {
  const { logger } = parts;
  const bindings = await checkKeyBindings(parts.database.db, parts.keyring, parts.dataProtection);
  if (!bindings.checked) {
    // an unreachable database never aborts start-up (readiness reports it); nothing is written
    // under any key until it answers
    if (bindings.error !== undefined)
      logger.warn(
        "key bindings not verified: the database did not answer; serving, and they are checked once it is back, before the background loops start (Production refuses a mismatch then)",
        { error: bindings.error },
      );
    return null;
  }
  if (bindings.problems.length > 0 && config.environment === "Production")
    throw new Error(bindings.problems.join("; "));
  for (const problem of bindings.problems) logger.warn(problem, { environment: config.environment });
  return { unrecorded: bindings.unrecorded };
}
