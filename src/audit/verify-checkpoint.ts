import { sql } from "drizzle-orm";
import { type Executor, execute } from "../db/client.ts";
import { PLATFORM_CHAIN } from "./chain.ts";
import { CHECKPOINT_FORMAT, type Checkpoint } from "./checkpoint.ts";

/** What the latest checkpoint says a chain lost since it was signed. */
export interface AnchorBreak {
  chain: string;
  kind: "trimmed" | "deleted" | "tenant deleted" | "changed";
  message: string;
}

/**
 * Compares the chains with a checkpoint, in the caller's snapshot: every chain it names must still
 * hold the row that was its head, with the hash signed. Missing: the chain was deleted (with its
 * tenant, when the tenant is gone too), or its tail was trimmed. A head row older than the first
 * row the chain keeps, in a checkpoint older than `retentionDays`, was pruned: not a break.
 */
export async function compareWithCheckpoint(
  tx: Executor,
  checkpoint: Checkpoint,
  input: { now: Date; retentionDays: number },
): Promise<AnchorBreak[]> {
  if (checkpoint.format !== CHECKPOINT_FORMAT) throw new Error("not a checkpoint");
  const breaks: AnchorBreak[] = [];
  const prunable = input.now.getTime() - Date.parse(checkpoint.at) > input.retentionDays * 86_400_000;
  const when = `the checkpoint of ${checkpoint.at}`;
  for (const cp of checkpoint.chains) {
    if (cp.headId === null) continue;
    const chainRows =
      cp.chain === PLATFORM_CHAIN ? sql`tenant_id is null` : sql`tenant_id::text = ${cp.chain}`;
    const [now] = await execute<{
      head_id: string | null;
      first: string | null;
      at_head: string | null;
      tenant: string | null;
    }>(
      tx,
      sql`select (select head_id::text from audit_chains where chain = ${cp.chain}) as head_id,
                 (select min(id)::text from audit_events where ${chainRows}) as first,
                 (select hash from audit_events where id = ${cp.headId} and ${chainRows}) as at_head,
                 (select code from tenants where id::text = ${cp.chain}) as tenant`,
    );
    const signed = `${cp.rows} rows, head row ${cp.headId}`;
    if (now?.at_head) {
      if (now.at_head !== cp.headHash)
        breaks.push({
          chain: cp.chain,
          kind: "changed",
          message: `row ${cp.headId}, the head ${when} signed, was changed`,
        });
      continue;
    }
    if (now?.head_id == null && now?.first == null) {
      if (cp.chain !== PLATFORM_CHAIN && now?.tenant == null)
        breaks.push({
          chain: cp.chain,
          kind: "tenant deleted",
          message: `tenant ${cp.tenantCode ?? "(no code)"} (${cp.chain}) is gone and its audit chain with it (${when}: ${signed})`,
        });
      else
        breaks.push({
          chain: cp.chain,
          kind: "deleted",
          message: `the chain was deleted (${when}: ${signed})`,
        });
      continue;
    }
    if (prunable && now?.first != null && Number(now.first) > cp.headId) continue;
    breaks.push({
      chain: cp.chain,
      kind: "trimmed",
      message: `its tail was trimmed: row ${cp.headId}, the head ${when} signed (${cp.rows} rows), is gone; the chain now ends at row ${now?.head_id ?? "none"}`,
    });
  }
  return breaks;
}
