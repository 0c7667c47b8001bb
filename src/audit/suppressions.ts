/** The limit of `recordAuditLimited` that was full when a row was dropped. */
export type SuppressionLimit = "address" | "tenant";

interface Tally {
  /** Rows dropped since the last log line of the key. */
  pending: number;
  /** When this process last logged the key; null: never. */
  lineAtMs: number | null;
  /** When this process last asked the shared bucket for the key's `audit.rows_suppressed` row. */
  markerAtMs: number | null;
}

/** A log line due: rows dropped since the key's last line, and how long since it (null: the first). */
export interface SuppressionLine {
  suppressed: number;
  sinceMs: number | null;
}

/**
 * This process's record of the audit rows the failure limiter dropped, per limiter key and action:
 * what makes one log line per key per window, not one per row, and spares a flood a shared call
 * per row for the summary row. Bounded: past `maxKeys` keys the oldest is forgotten (its count
 * stays in `plinth.audit.rows_suppressed`).
 */
export class AuditSuppressions {
  private readonly tallies = new Map<string, Tally>();

  constructor(private readonly maxKeys = 10_000) {}

  /** Counts one dropped row of `key` at `nowMs`; the line to log now, or null (one per window). */
  dropped(key: string, nowMs: number, windowMs: number): SuppressionLine | null {
    const tally = this.tallyOf(key);
    tally.pending++;
    const since = tally.lineAtMs === null ? null : nowMs - tally.lineAtMs;
    // a clock put back by more than a window counts as a window gone, not a wait until it catches up
    if (since !== null && Math.abs(since) < windowMs) return null;
    const line = { suppressed: tally.pending, sinceMs: since === null ? null : Math.max(0, since) };
    tally.pending = 0;
    tally.lineAtMs = nowMs;
    return line;
  }

  /** Whether to ask the shared bucket for `key`'s summary row now: at most once a window per process. */
  claimMarker(key: string, nowMs: number, windowMs: number): boolean {
    const tally = this.tallyOf(key);
    if (tally.markerAtMs !== null && Math.abs(nowMs - tally.markerAtMs) < windowMs) return false;
    tally.markerAtMs = nowMs;
    return true;
  }

  /** Keys this process keeps a tally for (tests: the bound). */
  get size(): number {
    return this.tallies.size;
  }

  private tallyOf(key: string): Tally {
    let tally = this.tallies.get(key);
    if (tally) return tally;
    if (this.tallies.size >= this.maxKeys) {
      const oldest = this.tallies.keys().next().value;
      if (oldest !== undefined) this.tallies.delete(oldest);
    }
    tally = { pending: 0, lineAtMs: null, markerAtMs: null };
    this.tallies.set(key, tally);
    return tally;
  }
}
