import { type Clock, epochMs, isFresh, systemClock } from "../clock.ts";
import type { Database } from "../db/client.ts";
import type { Logger } from "../telemetry/logger.ts";

/** Channel on which every process hears that a tenant's data key was destroyed or re-wrapped (payload: the tenant id). */
export const DATA_KEY_CHANNEL = "plinth_tenant_data_keys";

interface CachedKey {
  tenantId: string;
  keyId: string;
  dataKey: Buffer;
  /** When it was cached (the injected clock). */
  at: number;
}

/**
 * Tenant data keys this process has unwrapped, by data key id, so opening a tenant's secret costs no
 * round trip and no unwrap after the first. Bounded (the oldest entry goes first) and each entry
 * lives `ttlMs` at most; a tenant's key is evicted at once here when it is destroyed or re-wrapped,
 * and in every other process through NOTIFY on `plinth_tenant_data_keys` (the TTL bounds staleness
 * where LISTEN is not available, behind a transaction pooler). An entry cached by a clock since put
 * back is read again (`isFresh`), not kept for the TTL plus the step.
 */
export class DataKeyCache {
  readonly #entries = new Map<string, CachedKey>();
  readonly #max: number;
  readonly #ttlMs: number;
  readonly #clock: Clock;

  constructor(options: { max?: number; ttlMs?: number; clock?: Clock } = {}) {
    this.#max = options.max ?? 10_000;
    this.#ttlMs = options.ttlMs ?? 10 * 60_000;
    this.#clock = options.clock ?? systemClock;
  }

  get(keyId: string): { keyId: string; dataKey: Buffer } | undefined {
    const entry = this.#entries.get(keyId);
    if (!entry) return undefined;
    if (!isFresh(entry.at, this.#ttlMs, epochMs(this.#clock))) {
      this.#entries.delete(keyId);
      return undefined;
    }
    return { keyId: entry.keyId, dataKey: entry.dataKey };
  }

  set(tenantId: string, key: { keyId: string; dataKey: Buffer }): void {
    this.#entries.delete(key.keyId);
    if (this.#entries.size >= this.#max) {
      const oldest = this.#entries.keys().next();
      if (!oldest.done) this.#entries.delete(oldest.value);
    }
    this.#entries.set(key.keyId, { tenantId, ...key, at: epochMs(this.#clock) });
  }

  evictTenant(tenantId: string): void {
    for (const [keyId, entry] of this.#entries) if (entry.tenantId === tenantId) this.#entries.delete(keyId);
  }

  get size(): number {
    return this.#entries.size;
  }

  /** Listens for destroyed and re-wrapped keys of other processes; without LISTEN the TTL still bounds staleness. */
  async listen(database: Database, logger: Logger): Promise<void> {
    if (!database.sessions) return;
    try {
      await database.listen(
        DATA_KEY_CHANNEL,
        (tenantId) => this.evictTenant(tenantId),
        // listening again after a lost connection: a key destroyed meanwhile was missed
        () => this.#entries.clear(),
      );
    } catch (error) {
      logger.warn("cannot LISTEN for tenant data key changes; cached data keys expire by TTL only", {
        error: (error as Error).message,
      });
    }
  }
}
