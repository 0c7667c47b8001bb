import type { SQL } from "drizzle-orm";
import { type Executor, execute } from "../../db/client.ts";

/** Rows a bulk action locks and changes per statement (its own transaction): no table-wide lock. */
export const BULK_BATCH_SIZE = 500;

/**
 * Runs `batch` over the filtered rows in id order, BULK_BATCH_SIZE at a time, each batch one
 * statement; returns how many rows changed.
 */
export async function inBatches(db: Executor, batch: (after: number) => SQL): Promise<number> {
  let after = 0;
  let changed = 0;
  for (;;) {
    let row: { picked: number; changed: number; last: string | number | null } | undefined;
    for (let attempt = 1; ; attempt++) {
      try {
        [row] = await execute<{ picked: number; changed: number; last: string | number | null }>(
          db,
          batch(after),
        );
        break;
      } catch (error) {
        // a job enqueued meanwhile took a dedup key, or a deadlock with a claim: the batch again
        if (attempt >= 3 || !(isUniqueViolation(error) || hasCode(error, "40P01"))) throw error;
      }
    }
    changed += Number(row?.changed ?? 0);
    if (!row || Number(row.picked) < BULK_BATCH_SIZE || row.last === null) return changed;
    after = Number(row.last);
  }
}

function hasCode(error: unknown, code: string): boolean {
  for (let e: unknown = error; e && typeof e === "object"; e = (e as { cause?: unknown }).cause)
    if ((e as { code?: unknown }).code === code) return true;
  return false;
}

/** Another unfinished job holds the dedup key (23505). */
export function isUniqueViolation(error: unknown): boolean {
  return hasCode(error, "23505");
}
