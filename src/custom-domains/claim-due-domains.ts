import { type SQL, sql } from "drizzle-orm";
import { type Executor, execute } from "../db/client.ts";

export const timestamptz = (date: Date): SQL => sql`${date.toISOString()}::timestamptz`;

export interface ClaimedDomain {
  id: string;
  tenantId: string;
  hostname: string;
  status: "Pending" | "Failed" | "Active";
  verificationToken: string;
  gatewayHostnameId: string | null;
  checkAttempts: number;
  /** `next_check_at` as claimed (text, full precision): a later value means a check was requested meanwhile. */
  dueAt: string;
}

/**
 * Claims up to `limit` due domains for `owner` until `now + leaseMs`: Pending and Failed ones to
 * verify, and Active ones whose certificate is not issued yet to refresh the TLS status. Any
 * number of processes may run this at once (`for update skip locked`, no leader): a row is
 * checked by one process at a time, and an expired lease (a crashed process) is taken over.
 */
export async function claimDueDomains(
  db: Executor,
  input: { owner: string; now: Date; leaseMs: number; limit: number },
): Promise<ClaimedDomain[]> {
  const now = timestamptz(input.now);
  const until = timestamptz(new Date(input.now.getTime() + input.leaseMs));
  const rows = await execute<{
    id: string;
    tenant_id: string;
    hostname: string;
    status: ClaimedDomain["status"];
    verification_token: string;
    gateway_hostname_id: string | null;
    check_attempts: number;
    due_at: string;
  }>(
    db,
    // materialized: locked once. As `where d.id in (…)` the planner may rescan the locking subquery
    // for each row of a nested loop (it did under the API's role, whose policy quals change the
    // estimates), and two processes' claims then split nothing: one took every batch
    sql`with due as materialized (
          select id from tenant_domains
          where (status <> 'Active' or tls_status is distinct from 'active')
            and next_check_at <= ${now}
            and (locked_until is null or locked_until <= ${now})
          order by next_check_at
          limit ${input.limit}
          for update skip locked
        )
        update tenant_domains d
        set locked_by = ${input.owner}, locked_until = ${until}
        from due
        where d.id = due.id
        returning d.id, d.tenant_id, d.hostname, d.status, d.verification_token, d.gateway_hostname_id,
          d.check_attempts, d.next_check_at::text as due_at`,
  );
  return rows.map((r) => ({
    id: r.id,
    tenantId: r.tenant_id,
    hostname: r.hostname,
    status: r.status,
    verificationToken: r.verification_token,
    gatewayHostnameId: r.gateway_hostname_id,
    checkAttempts: Number(r.check_attempts),
    dueAt: r.due_at,
  }));
}
