import { and, asc, eq, gt, type SQL, sql } from "drizzle-orm";
import type { Ctx } from "../context.ts";
import type { Executor } from "../db/client.ts";
import { type DatabaseDeps, withPlatformSnapshot } from "../db/operation.ts";
import { auditChains, auditEvents } from "../db/schema/audit.ts";
import { auditRowHash, chainOf, GENESIS_HASH, PLATFORM_CHAIN } from "./chain.ts";

/** The first break of a chain: which row, and how it was tampered with. */
export interface ChainBreak {
  chain: string;
  kind: "changed" | "inserted" | "removed";
  /** The row changed or inserted, or the first row after the removed ones (null: removed at the end). */
  id: number | null;
  message: string;
}

export interface ChainReport {
  chain: string;
  rows: number;
  broken: ChainBreak | null;
}

type Row = typeof auditEvents.$inferSelect;

const BATCH = 1_000;

const chainCondition = (chain: string): SQL =>
  chain === PLATFORM_CHAIN ? sql`${auditEvents.tenantId} is null` : eq(auditEvents.tenantId, chain);

/** The chain's rows in id order, a batch per round trip (one snapshot: the caller's transaction). */
async function* rowsOf(tx: Executor, chain: string): AsyncGenerator<Row> {
  let after = 0;
  for (;;) {
    const rows = await tx
      .select()
      .from(auditEvents)
      .where(and(chainCondition(chain), gt(auditEvents.id, after)))
      .orderBy(asc(auditEvents.id))
      .limit(BATCH);
    yield* rows;
    const last = rows.at(-1);
    if (!last || rows.length < BATCH) return;
    after = last.id;
  }
}

/**
 * Walks one chain from where it starts (`start_hash`: genesis, or the last pruned row's hash) to its
 * head. Each row's hash is recomputed and its `prev_hash` compared with the hash before it; at the
 * first mismatch one row of look-ahead tells the kind: the chain continuing past the row (the next
 * row links to the hash before it) means it was inserted; a hash that no longer matches the row's
 * content means it was changed; a row intact but linking to the hash before the last good row means
 * that row was inserted with a correct hash; a row intact but linking to a hash never seen means
 * rows before it were removed. At the end the last row must be the head `audit_chains` recorded.
 */
export async function verifyChain(tx: Executor, chain: string): Promise<ChainReport> {
  const [head] = await tx.select().from(auditChains).where(eq(auditChains.chain, chain));
  let expected = head?.startHash ?? GENESIS_HASH;
  let rows = 0;
  let current: Row | undefined;
  let lastGood: Row | undefined;
  /** The hash the chain stood at before `lastGood`: a row linking to it skipped `lastGood`. */
  let beforeLastGood: string | undefined;
  const broke = (kind: ChainBreak["kind"], id: number | null, message: string): ChainReport => ({
    chain,
    rows,
    broken: { chain, kind, id, message },
  });
  const judge = (row: Row, next: { prevHash: string } | undefined): ChainReport | null => {
    const contentOk = auditRowHash(row) === row.hash;
    if (contentOk && row.prevHash === expected) {
      if (head && lastGood?.id === head.headId)
        return broke("inserted", row.id, `row ${row.id} was inserted after the chain's head ${head.headId}`);
      beforeLastGood = expected;
      expected = row.hash;
      lastGood = row;
      return null;
    }
    if (next && next.prevHash === expected) return broke("inserted", row.id, `row ${row.id} was inserted`);
    if (!contentOk) return broke("changed", row.id, `row ${row.id} was changed: its hash no longer matches`);
    // an inserted row whose hash is right links on from the row before it; the next genuine row
    // still links to that row, past the forgery: the forgery is named, not a gap after it
    if (lastGood && row.prevHash === beforeLastGood)
      return broke(
        "inserted",
        lastGood.id,
        `row ${lastGood.id} was inserted: row ${row.id} links to the row before it`,
      );
    return broke(
      "removed",
      row.id,
      `row(s) removed before row ${row.id} (the chain breaks after ${lastGood ? `row ${lastGood.id}` : "its start"})`,
    );
  };
  for await (const row of rowsOf(tx, chain)) {
    rows++;
    if (current) {
      const report = judge(current, row);
      if (report) return report;
    }
    current = row;
  }
  if (current) {
    const report = judge(current, head ? { prevHash: head.headHash } : undefined);
    if (report) return report;
  }
  if (head && expected !== head.headHash)
    return broke(
      "removed",
      null,
      `row(s) removed at the end: the head is row ${head.headId}, the chain ends ${lastGood ? `at row ${lastGood.id}` : "before any row"}`,
    );
  return { chain, rows, broken: null };
}

/**
 * Verifies every chain, or one tenant's (`tenantId`; `platform` for the platform chain), in one
 * read-only snapshot so concurrent writers cannot look like tampering.
 */
export async function verifyAuditChains(
  deps: DatabaseDeps,
  ctx: Ctx,
  input: { tenantId?: string } = {},
): Promise<ChainReport[]> {
  // every chain, or one, on the named platform path, in one snapshot
  return withPlatformSnapshot(deps, ctx, async (tx) => {
    const chains =
      input.tenantId !== undefined
        ? [input.tenantId === PLATFORM_CHAIN ? PLATFORM_CHAIN : chainOf(input.tenantId)]
        : await chainsOf(tx);
    const reports: ChainReport[] = [];
    for (const chain of chains) reports.push(await verifyChain(tx, chain));
    return reports;
  });
}

/** Every chain with a head or with rows (rows without a head row are verified from genesis). */
async function chainsOf(tx: Executor): Promise<string[]> {
  const heads = await tx.select({ chain: auditChains.chain }).from(auditChains);
  const tenants = await tx
    .selectDistinct({ tenantId: auditEvents.tenantId })
    .from(auditEvents)
    .orderBy(asc(auditEvents.tenantId));
  const all = new Set([...heads.map((h) => h.chain), ...tenants.map((t) => chainOf(t.tenantId))]);
  return [...all].sort();
}
