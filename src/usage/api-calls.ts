/**
 * `api_calls` counted by Plinth: each request to the tenant API adds one to an in-process counter of
 * its tenant (a map increment on the hot path), and every `FeatureUsageReconciliation:
 * ApiCallsFlushSeconds` the counts go to the usage ledger as one event per tenant (`recordUsage`:
 * the ledger row and the cached counter), which the reconciliation loop keeps honest like any
 * other usage. A process's last counts are written when it closes (closeDeps). docs/billing.md,
 * "api_calls".
 */
import { systemCtx } from "../context.ts";
import type { Logger } from "../telemetry/logger.ts";
import type { UsageDeps } from "./counters.ts";
import { getCurrentUsage } from "./current-usage.ts";
import { recordUsage } from "./record-usage.ts";

export const API_CALLS = "api_calls";

interface Unwritten {
  idempotencyKey: string;
  quantity: number;
  /** Flushes this batch failed in: retried once with the same key, then dropped (logged). */
  failures: number;
}

export class ApiCallMeter {
  readonly #deps: UsageDeps & { logger: Logger };
  readonly #flushMs: number;
  readonly #instance = crypto.randomUUID();
  #pending = new Map<string, number>();
  /** Batches a flush could not write, retried at the next one under their own idempotency key. */
  #unwritten: { tenantId: string; entry: Unwritten }[] = [];
  /** The tenant's monthly count after this process's last write (the shared cached counter). */
  readonly #written = new Map<string, number>();
  #timer: ReturnType<typeof setInterval> | undefined;
  #flushing: Promise<void> | undefined;
  #seq = 0;

  constructor(deps: UsageDeps & { logger: Logger }, flushSeconds: number) {
    this.#deps = deps;
    this.#flushMs = flushSeconds * 1000;
  }

  /** One call of the tenant's; the first starts the flush timer (unref'd: it keeps no process alive). */
  count(tenantId: string): void {
    this.#pending.set(tenantId, (this.#pending.get(tenantId) ?? 0) + 1);
    if (this.#timer === undefined) {
      this.#timer = setInterval(() => void this.flush(), this.#flushMs);
      this.#timer.unref?.();
    }
  }

  /**
   * The tenant's calls this month as far as this process knows: the shared counter at its last
   * write plus what it counted since; null before its first write (nothing known to enforce on).
   */
  known(tenantId: string): number | null {
    const written = this.#written.get(tenantId);
    if (written === undefined) return null;
    let unwritten = 0;
    for (const batch of this.#unwritten) if (batch.tenantId === tenantId) unwritten += batch.entry.quantity;
    return written + (this.#pending.get(tenantId) ?? 0) + unwritten;
  }

  /** Writes the counts so far; a flush already running is joined. */
  flush(): Promise<void> {
    this.#flushing ??= this.#write().finally(() => {
      this.#flushing = undefined;
    });
    return this.#flushing;
  }

  /** Stops the timer and writes what is left. */
  async stop(): Promise<void> {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
    await this.flush();
  }

  async #write(): Promise<void> {
    const retries = this.#unwritten;
    this.#unwritten = [];
    for (const { tenantId, entry } of retries) await this.#record(tenantId, entry);
    const batch = this.#pending;
    this.#pending = new Map();
    const seq = this.#seq++;
    for (const [tenantId, quantity] of batch)
      await this.#record(tenantId, {
        idempotencyKey: `api_calls:${this.#instance}:${seq}`,
        quantity,
        failures: 0,
      });
  }

  async #record(tenantId: string, entry: Unwritten): Promise<void> {
    try {
      const ctx = systemCtx("api-calls", tenantId);
      const result = await recordUsage(this.#deps, ctx, {
        feature: API_CALLS,
        quantity: entry.quantity,
        idempotencyKey: entry.idempotencyKey,
      });
      // no cached counter to add to (first write of the month, or evicted): built from the ledger
      const used =
        result.counter ?? (await getCurrentUsage(this.#deps, ctx, { feature: API_CALLS, period: "month" }));
      this.#written.set(tenantId, used);
    } catch (error) {
      if (entry.failures >= 1) {
        this.#deps.logger.error("api_calls not written twice; dropped", {
          tenantId,
          quantity: entry.quantity,
          error,
        });
        return;
      }
      this.#unwritten.push({ tenantId, entry: { ...entry, failures: entry.failures + 1 } });
      this.#deps.logger.warn("api_calls not written; retrying at the next flush", { tenantId, error });
    }
  }
}
