import { and, eq } from "drizzle-orm";
import type { Refusal } from "../auth/session-lookup.ts";
import { isFresh } from "../clock.ts";
import { systemCtx, type TenantCtx } from "../context.ts";
import { withPlatformDatabase } from "../db/operation.ts";
import { apiKeys, subscriptions, tenants } from "../db/schema/index.ts";
import type { Deps } from "../deps.ts";
import { apiKeyDigest, apiKeyHash, hashMatches, newApiKey, newPrefix, prefixOf } from "./format.ts";
import { LAST_USE_INTERVAL_MS, markApiKeyUsed } from "./keys.ts";

/** The key a request presented, once checked. */
export interface OpenApiKey {
  keyId: string;
  tenantId: string;
  scopes: readonly string[];
  /** The tenant's subscription is suspended: the key reads (GET, HEAD) and changes nothing. */
  readOnly: boolean;
}

/**
 * How long a process trusts a key's row without asking the database: at most one second (and never
 * longer than `Authentication:SessionCacheSeconds`), so a revocation whose notice is lost still
 * takes effect within a second; the notice itself evicts at once.
 */
export const API_KEY_CACHE_MS = 1_000;
const NEVER = new Date(8.64e15);

interface KeyRecord extends OpenApiKey {
  secretHash: string;
  previousSecretHash: string | null;
  previousExpiresAt: number | null;
  expiresAt: number | null;
  revoked: boolean;
  tenantActive: boolean;
}

/**
 * What an unknown prefix is checked against, so that it costs what a known one does: the same
 * cache entry, one statement, the same digest and two constant-time comparisons (the key's id is not
 * told by timing, docs/api-keys.md). No key's secret hashes to it.
 */
const UNKNOWN: KeyRecord = {
  keyId: "",
  tenantId: "",
  scopes: [],
  readOnly: false,
  secretHash: apiKeyHash(newApiKey(newPrefix())),
  previousSecretHash: apiKeyHash(newApiKey(newPrefix())),
  previousExpiresAt: 0,
  expiresAt: null,
  revoked: true,
  tenantActive: false,
};

type LookupDeps = Pick<Deps, "database" | "sessionCache" | "clock">;

/** A platform lookup: the key's own row names its tenant (the request's is not known before it). */
const KEY_LOOKUP = systemCtx("api key lookup");

/** The key row of `prefix` (`UNKNOWN` when there is none), cached for `API_KEY_CACHE_MS` either way. */
async function keyRecord(deps: LookupDeps, prefix: string): Promise<KeyRecord> {
  const cacheKey = `k:${prefix}`;
  const hit = deps.sessionCache.get(cacheKey);
  if (hit) return hit.value as KeyRecord;
  const [row] = await withPlatformDatabase(deps, KEY_LOOKUP, (db) =>
    db
      .select({
        keyId: apiKeys.id,
        tenantId: apiKeys.tenantId,
        scopes: apiKeys.scopes,
        secretHash: apiKeys.secretHash,
        previousSecretHash: apiKeys.previousSecretHash,
        previousExpiresAt: apiKeys.previousExpiresAt,
        expiresAt: apiKeys.expiresAt,
        revokedAt: apiKeys.revokedAt,
        tenantStatus: tenants.status,
        subscriptionStatus: subscriptions.status,
      })
      .from(apiKeys)
      .innerJoin(tenants, eq(tenants.id, apiKeys.tenantId))
      .leftJoin(subscriptions, and(eq(subscriptions.tenantId, apiKeys.tenantId)))
      .where(eq(apiKeys.prefix, prefix))
      .limit(1),
  );
  const record: KeyRecord = !row
    ? UNKNOWN
    : {
        keyId: row.keyId,
        tenantId: row.tenantId,
        scopes: row.scopes,
        readOnly: row.subscriptionStatus === "suspended",
        secretHash: row.secretHash,
        previousSecretHash: row.previousSecretHash,
        previousExpiresAt: row.previousExpiresAt?.getTime() ?? null,
        expiresAt: row.expiresAt?.getTime() ?? null,
        revoked: row.revokedAt !== null,
        tenantActive: row.tenantStatus === "Active",
      };
  deps.sessionCache.set(
    cacheKey,
    {
      sessionId: record.keyId,
      userId: null,
      tenantId: record.tenantId,
      expiresAt: row?.expiresAt ?? NEVER,
      value: record,
    },
    API_KEY_CACHE_MS,
  );
  return record;
}

/**
 * The tenant API key a bearer token is, or why it is refused (the detail of a 401). The secret is
 * compared in constant time with the stored SHA-256 (and, during a roll's grace period, with the
 * replaced one's) before anything about the key is told: revoked, expired, or of a suspended tenant.
 */
export async function openApiKey(deps: LookupDeps, presented: string): Promise<OpenApiKey | Refusal> {
  const prefix = prefixOf(presented);
  if (!prefix) return { refused: "Malformed API key." };
  const record = await keyRecord(deps, prefix);
  const now = deps.clock.now().getTime();
  const digest = apiKeyDigest(presented);
  // both comparisons always run (a placeholder for a key without a replaced secret): the same work
  // for a known id, an unknown one, with or without a roll
  const current = hashMatches(digest, record.secretHash);
  const previousMatches = hashMatches(digest, record.previousSecretHash ?? UNKNOWN.previousSecretHash);
  const previous = record.previousExpiresAt !== null && record.previousExpiresAt > now && previousMatches;
  if (record === UNKNOWN || (!current && !previous)) return { refused: "Invalid API key." };
  if (record.revoked) return { refused: "The API key has been revoked." };
  if (record.expiresAt !== null && record.expiresAt <= now) return { refused: "The API key has expired." };
  if (!record.tenantActive) return { refused: "The tenant is suspended." };
  return { keyId: record.keyId, tenantId: record.tenantId, scopes: record.scopes, readOnly: record.readOnly };
}

/**
 * Records keys' last use without a write per request: this process tries at most once a minute per
 * key (and `markApiKeyUsed` writes only when the stored use is a minute old), after the answer,
 * never holding the request up. A try stamped by a clock since put back (`isFresh`) does not hold
 * the next one back.
 */
export function apiKeyUseRecorder(deps: Pick<Deps, "database" | "clock" | "pending">) {
  const tried = new Map<string, number>();
  return (ctx: TenantCtx, keyId: string): void => {
    const now = deps.clock.now().getTime();
    const last = tried.get(keyId);
    if (last !== undefined && isFresh(last, LAST_USE_INTERVAL_MS, now)) return;
    if (tried.size >= 50_000) tried.clear();
    tried.set(keyId, now);
    deps.pending.run("recording an API key's last use", async () => {
      await markApiKeyUsed(deps, ctx, { keyId });
    });
  };
}
