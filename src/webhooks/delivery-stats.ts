import { sql } from "drizzle-orm";
import { type Executor, execute } from "../db/client.ts";

export interface DeliveryStats {
  /** Seconds since the oldest delivery still pending was created; 0 with none pending. */
  oldestPendingSeconds: number;
  /** Enabled endpoints whose attempts are failing (a failure streak without a success since). */
  failingEndpoints: number;
}

/** What the delivery log holds now, for the metrics endpoint. */
export async function deliveryStats(db: Executor): Promise<DeliveryStats> {
  const [row] = await execute<{ oldest: string | number | null; failing: string | number }>(
    db,
    sql`select
          (select extract(epoch from (now() - min(created_at))) from webhook_deliveries where status = 'pending') as oldest,
          (select count(*) from webhook_endpoints where enabled and failing_since is not null) as failing`,
  );
  return {
    oldestPendingSeconds: Math.max(0, Number(row?.oldest ?? 0)),
    failingEndpoints: Number(row?.failing ?? 0),
  };
}
