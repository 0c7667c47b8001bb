import { sql } from "drizzle-orm";
import { type Clock, epochMs, isFresh } from "../clock.ts";
import { type Database, type Executor, execute } from "../db/client.ts";
import type { Logger } from "../telemetry/logger.ts";

/**
 * Channel on which every process hears that sessions ended (logout, disable, password change) and
 * that an API key was revoked or rolled.
 */
export const SESSION_CHANNEL = "plinth_sessions";

/**
 * What ended: one session, every session of a user, or of a tenant; or an API key changed. A user's
 * change also stands for a change of what the caches know of them (a role, a membership).
 */
export type SessionChange =
  | { sessionId: string }
  | { userId: string }
  | { tenantId: string }
  | { apiKeyId: string };

export interface SessionEntry {
  /** The session's id; for an API key, the key's id. */
  sessionId: string;
  /** null for an API key (owned by its tenant). */
  userId: string | null;
  tenantId: string | null;
  expiresAt: Date;
  value: unknown;
}

/** What a process remembers of a user beside their sessions (their memberships), by user id. */
export interface UserEntry {
  userId: string;
  /** The tenants the value speaks of: a change of any of them evicts it. */
  tenantIds: readonly string[];
  value: unknown;
}

/**
 * Open sessions seen recently, so an authenticated request costs no database round trip.
 * Entries live `ttlMs` at most; a session that ends is evicted at once in this process and, through
 * NOTIFY on `plinth_sessions`, in every other process (the TTL bounds staleness if a notice is lost).
 * An entry stamped by a clock since put back is read again (`isFresh`), not kept for the TTL plus the step.
 */
export class SessionCache {
  readonly #entries = new Map<string, SessionEntry & { at: number; ttlMs: number; expiresAtMs: number }>();
  readonly #users = new Map<string, UserEntry & { at: number }>();
  /** The loads under way, one per user: a burst of a user's requests on a miss costs one query. */
  readonly #loading = new Map<string, Promise<unknown>>();
  /** Counts evictions, so a value read before one is not remembered after it. */
  #generation = 0;
  readonly #ttlMs: number;
  readonly #max: number;
  readonly #clock: Clock;

  constructor(options: { ttlMs: number; clock: Clock; max?: number }) {
    this.#ttlMs = options.ttlMs;
    this.#clock = options.clock;
    this.#max = options.max ?? 50_000;
  }

  get(key: string): SessionEntry | undefined {
    const entry = this.#entries.get(key);
    if (!entry) return undefined;
    const now = epochMs(this.#clock);
    if (!isFresh(entry.at, entry.ttlMs, now) || entry.expiresAtMs <= now) {
      this.#entries.delete(key);
      return undefined;
    }
    return entry;
  }

  /** Remembers an entry for the cache's TTL, or for `maxTtlMs` when that is shorter. */
  set(key: string, entry: SessionEntry, maxTtlMs = Number.POSITIVE_INFINITY): void {
    const ttlMs = Math.min(this.#ttlMs, maxTtlMs);
    if (ttlMs <= 0) return;
    if (this.#entries.size >= this.#max) this.#entries.clear();
    this.#entries.set(key, {
      ...entry,
      at: epochMs(this.#clock),
      ttlMs,
      expiresAtMs: entry.expiresAt.getTime(),
    });
  }

  /** A user's remembered state (`user`), or undefined when only a load can tell: no await, no load. */
  rememberedUser<T>(userId: string): T | undefined {
    const hit = this.#users.get(userId);
    if (hit === undefined || !isFresh(hit.at, this.#ttlMs, epochMs(this.#clock))) return undefined;
    return hit.value as T;
  }

  /**
   * A user's remembered state, else what `load` reads (one load at a time per user), remembered for
   * the TTL unless a change of the user or of one of its tenants was heard while it was read.
   */
  user<T>(userId: string, load: () => Promise<{ value: T; tenantIds: readonly string[] }>): Promise<T> {
    const hit = this.#users.get(userId);
    if (hit !== undefined) {
      if (isFresh(hit.at, this.#ttlMs, epochMs(this.#clock))) return Promise.resolve(hit.value as T);
      this.#users.delete(userId);
    }
    const under = this.#loading.get(userId);
    if (under !== undefined) return under as Promise<T>;
    const generation = this.#generation;
    const loading = load()
      .then(({ value, tenantIds }) => {
        if (this.#ttlMs > 0 && generation === this.#generation) {
          if (this.#users.size >= this.#max) this.#users.clear();
          this.#users.set(userId, { userId, tenantIds, value, at: epochMs(this.#clock) });
        }
        return value;
      })
      .finally(() => {
        if (this.#loading.get(userId) === loading) this.#loading.delete(userId);
      });
    this.#loading.set(userId, loading);
    return loading;
  }

  evict(change: SessionChange): void {
    this.#generation++;
    // a load under way may have read what this change made stale: the next request reads afresh
    this.#loading.clear();
    if ("userId" in change) this.#users.delete(change.userId);
    else if ("tenantId" in change)
      for (const [userId, entry] of this.#users) {
        if (entry.tenantIds.includes(change.tenantId)) this.#users.delete(userId);
      }
    for (const [key, entry] of this.#entries) {
      if (
        ("sessionId" in change && entry.sessionId === change.sessionId) ||
        ("userId" in change && entry.userId === change.userId) ||
        ("tenantId" in change && entry.tenantId === change.tenantId) ||
        ("apiKeyId" in change && entry.sessionId === change.apiKeyId)
      ) {
        this.#entries.delete(key);
      }
    }
  }

  clear(): void {
    this.#generation++;
    this.#entries.clear();
    this.#users.clear();
    this.#loading.clear();
  }

  /** Listens for changes from other processes. Without LISTEN (a pooler), the TTL still bounds staleness. */
  async listen(database: Database, logger: Logger): Promise<void> {
    try {
      await database.listen(
        SESSION_CHANNEL,
        (payload) => {
          try {
            this.evict(JSON.parse(payload) as SessionChange);
          } catch {
            this.clear();
          }
        },
        // listening again after a lost connection: an ended session notified meanwhile was missed
        () => this.clear(),
      );
    } catch (error) {
      logger.warn("cannot LISTEN for session changes; cached sessions expire by TTL only", {
        error: (error as Error).message,
      });
    }
  }
}

/** Tells every process (this one included, through its listener) that sessions ended. */
export async function announceSessionChange(db: Executor, change: SessionChange): Promise<void> {
  await execute(db, sql`select pg_notify(${SESSION_CHANNEL}, ${JSON.stringify(change)})`);
}

/**
 * What the caches hold of a user changed without a session ending (a membership joined or
 * reactivated): this process forgets it at once, every process as `db`'s transaction commits.
 */
export async function announceUserChange(cache: SessionCache, db: Executor, userId: string): Promise<void> {
  cache.evict({ userId });
  await announceSessionChange(db, { userId });
}
