import { and, eq, ne, type SQL, sql } from "drizzle-orm";
import { recordAudit } from "../audit/record.ts";
import { systemCtx } from "../context.ts";
import { type Executor, execute } from "../db/client.ts";
import { tenantDomains } from "../db/schema/index.ts";
import type { Deps } from "../deps.ts";
import { emitEvent } from "../events/outbox.ts";
import { enqueueContext } from "../jobs/enqueue.ts";
import { workerId } from "../runtime/worker-id.ts";
import type { DnsResolver } from "./dns.ts";
import { activeElsewhere, claimExpiry, expireDomainClaims } from "./domains.ts";
import type { GatewayClient } from "./gateway.ts";
import { verificationRecordName } from "./hostnames.ts";
import { cnameTargets, dnsResolver, gatewayClient, missingDomainSettings, retryDelayMs } from "./settings.ts";
import { type CheckOutcome, checkDomain } from "./verify.ts";

const ts = (date: Date): SQL => sql`${date.toISOString()}::timestamptz`;
const MOVED_REASON =
  "Another tenant proved ownership of this name through its own TXT record; the name now serves that tenant.";
/** Checks run at once per tick within one process (each is a few DNS and gateway requests). */
const PARALLEL_CHECKS = 8;

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
  const now = ts(input.now);
  const until = ts(new Date(input.now.getTime() + input.leaseMs));
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
    sql`update tenant_domains d
        set locked_by = ${input.owner}, locked_until = ${until}
        where d.id in (
          select id from tenant_domains
          where (status <> 'Active' or tls_status is distinct from 'active')
            and next_check_at <= ${now}
            and (locked_until is null or locked_until <= ${now})
          order by next_check_at
          limit ${input.limit}
          for update skip locked
        )
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

export type DomainCheckDeps = Pick<Deps, "database" | "cache" | "clock" | "config" | "tenants" | "logger"> &
  Partial<Pick<Deps, "fetch">>;

export interface DomainCheckOptions {
  /** Lease owner id; default `workerId()`. */
  owner?: string;
  /** Test seams: services built from configuration otherwise. */
  resolver?: DnsResolver;
  gateway?: GatewayClient;
  /** Called after each domain a tick handled (tests observe progress without sleeping). */
  onChecked?: (
    domain: ClaimedDomain,
    result: { status: ClaimedDomain["status"]; code: string | null },
  ) => void;
}

export interface DomainTicker {
  owner: string;
  /** One round: claims a batch and checks it; resolves how many domains it handled. */
  tick(): Promise<number>;
}

/**
 * Claims due domains with a lease and checks each (the step the tenant-domain loop,
 * src/loops/tenant-domains-loop.ts, runs every tick). With the configuration incomplete it
 * claims nothing and changes nothing, and says so once in the log (configuration is read at
 * start-up, so completing it takes a restart).
 */
export function createDomainTicker(deps: DomainCheckDeps, options: DomainCheckOptions = {}): DomainTicker {
  const settings = deps.config.settings.TenantDomains;
  const owner = options.owner ?? workerId();
  const missing = missingDomainSettings(settings);
  const resolver = options.resolver ?? dnsResolver(settings, deps.fetch);
  const gateway = options.gateway ?? gatewayClient(settings, deps.logger, deps.fetch);
  const targets = cnameTargets(settings);
  const db = deps.database.db;
  let toldIncomplete = false;

  /** Stores a check's result, fenced on our lease; false when the lease or the row is gone. */
  async function finish(
    domain: ClaimedDomain,
    set: Omit<Partial<typeof tenantDomains.$inferInsert>, "nextCheckAt"> & { nextCheckAt: Date },
    tx: Executor = db,
  ) {
    // a check requested while we held the lease (POST …/check) wins over our backoff
    const nextCheckAt = sql`case when ${tenantDomains.nextCheckAt} > ${domain.dueAt}::timestamptz
      then ${tenantDomains.nextCheckAt} else ${ts(set.nextCheckAt)} end`;
    const rows = await tx
      .update(tenantDomains)
      .set({ ...set, nextCheckAt, lockedBy: null, lockedUntil: null, updatedAt: deps.clock.now() })
      .where(and(eq(tenantDomains.id, domain.id), eq(tenantDomains.lockedBy, owner)))
      .returning({ id: tenantDomains.id });
    return rows.length > 0;
  }

  async function verify(domain: ClaimedDomain, services: { resolver: DnsResolver; gateway: GatewayClient }) {
    let outcome: CheckOutcome = await checkDomain(services, {
      hostname: domain.hostname,
      token: domain.verificationToken,
      recordName: verificationRecordName(settings.VerificationRecordPrefix, domain.hostname),
      targets,
    });
    const now = deps.clock.now();
    if (outcome.ok) {
      const activation = await activate(domain, outcome, now);
      if (activation === "abandoned") await abandoned(domain, services.gateway, outcome.gateway.id);
      if (activation !== "taken") {
        if (activation !== "abandoned") {
          deps.tenants.clear();
          deps.logger.info("tenant domain active", {
            domainId: domain.id,
            tenantId: domain.tenantId,
            hostname: domain.hostname,
            tlsStatus: outcome.gateway.sslStatus,
          });
        }
        return { status: "Active" as const, code: null };
      }
      // another claim on the name was activated at this very moment: check again soon
      outcome = {
        ok: false,
        code: "in_use_elsewhere",
        reason: "This name is in use elsewhere; it was verified by another claim at the same moment.",
        cnameTarget: outcome.cnameTarget,
      };
    } else if (
      (outcome.code === "txt_missing" || outcome.code === "txt_mismatch") &&
      (await activeElsewhere(db, { id: domain.id, hostname: domain.hostname }))
    ) {
      // told only now, when the claim is checked: publish this claim's own value to take the name over
      outcome = {
        ok: false,
        code: "in_use_elsewhere",
        reason: `This name is in use elsewhere. To move it here, publish this domain's own verification value at ${verificationRecordName(settings.VerificationRecordPrefix, domain.hostname)}.`,
        cnameTarget: outcome.cnameTarget,
      };
    }
    const attempts = domain.checkAttempts + 1;
    const failure = { code: outcome.code, reason: outcome.reason };
    const stored = await db.transaction(async (tx) => {
      const written = await finish(
        domain,
        {
          status: "Failed",
          cnameTarget: outcome.cnameTarget,
          lastCheckedAt: now,
          lastFailureCode: failure.code,
          lastFailureReason: failure.reason,
          checkAttempts: attempts,
          nextCheckAt: new Date(now.getTime() + retryDelayMs(settings, attempts)),
        },
        tx,
      );
      // told once, as the claim turns Failed (not at every re-check of a Failed one)
      if (written && domain.status !== "Failed")
        await emitEvent(tx, enqueueContext(deps), {
          tenantId: domain.tenantId,
          type: "domain.failed",
          data: { domainId: domain.id, hostname: domain.hostname, ...failure },
        });
      return written;
    });
    if (stored) {
      if (domain.status !== "Failed") deps.tenants.clear();
      deps.logger.info("tenant domain check failed", {
        domainId: domain.id,
        hostname: domain.hostname,
        code: outcome.code,
        attempts,
      });
    }
    return { status: "Failed" as const, code: outcome.code };
  }

  /**
   * Makes the claim Active, in one transaction with deactivating any other tenant's Active claim
   * on the name (it proved nothing this one did not: this tenant's own TXT value is published now).
   * "abandoned": our lease or the row is gone; "taken": another claim became Active concurrently.
   */
  async function activate(
    domain: ClaimedDomain,
    outcome: Extract<CheckOutcome, { ok: true }>,
    now: Date,
  ): Promise<"active" | "moved" | "abandoned" | "taken"> {
    const lost = new Error("lease lost");
    try {
      return await db.transaction(async (tx) => {
        const previous = await tx
          .update(tenantDomains)
          .set({
            status: "Failed",
            lastFailureCode: "ownership_moved",
            lastFailureReason: MOVED_REASON,
            deactivatedAt: now,
            gatewayHostnameId: null,
            gatewayStatus: null,
            tlsStatus: null,
            checkAttempts: 0,
            lastCheckedAt: now,
            // not re-checked on its own (two published values would move the name back and forth):
            // the tenant asks with POST …/check, or the claim expires
            expiresAt: claimExpiry(deps, now),
            nextCheckAt: claimExpiry(deps, now),
            updatedAt: now,
          })
          .where(
            and(
              eq(tenantDomains.hostname, domain.hostname),
              eq(tenantDomains.status, "Active"),
              ne(tenantDomains.id, domain.id),
            ),
          )
          .returning({ id: tenantDomains.id, tenantId: tenantDomains.tenantId });
        const stored = await finish(
          domain,
          {
            status: "Active",
            cnameTarget: outcome.cnameTarget,
            gatewayHostnameId: outcome.gateway.id,
            gatewayStatus: outcome.gateway.status,
            tlsStatus: outcome.gateway.sslStatus,
            lastCheckedAt: now,
            lastFailureCode: null,
            lastFailureReason: null,
            checkAttempts: 0,
            activatedAt: now,
            expiresAt: null,
            deactivatedAt: null,
            // the certificate is usually still pending: refresh its status soon
            nextCheckAt: new Date(now.getTime() + retryDelayMs(settings, 1)),
          },
          tx,
        );
        if (!stored) throw lost;
        await recordAudit(tx, systemCtx("tenant-domains", domain.tenantId), {
          action: "domain.activated",
          target: { type: "domain", id: domain.id },
          details: { hostname: domain.hostname },
        });
        await emitEvent(tx, enqueueContext(deps), {
          tenantId: domain.tenantId,
          type: "domain.activated",
          data: { domainId: domain.id, hostname: domain.hostname },
        });
        for (const from of previous)
          await emitEvent(tx, enqueueContext(deps), {
            tenantId: from.tenantId,
            type: "domain.failed",
            data: {
              domainId: from.id,
              hostname: domain.hostname,
              code: "ownership_moved",
              reason: MOVED_REASON,
            },
          });
        // the gateway entry is the name's: it now serves the new owner (its id moved to this row)
        for (const from of previous)
          deps.logger.info("tenant domain moved", {
            hostname: domain.hostname,
            fromTenantId: from.tenantId,
            fromDomainId: from.id,
            toTenantId: domain.tenantId,
            toDomainId: domain.id,
            gatewayHostnameId: outcome.gateway.id,
          });
        return previous.length > 0 ? "moved" : "active";
      });
    } catch (error) {
      if (error === lost) return "abandoned";
      if (
        (error as { code?: string })?.code === "23505" ||
        (error as { cause?: { code?: string } })?.cause?.code === "23505"
      )
        return "taken";
      throw error;
    }
  }

  /** The domain was deleted while we registered it: take it off the gateway again. */
  async function abandoned(domain: ClaimedDomain, gw: GatewayClient, gatewayId: string) {
    const [row] = await db
      .select({ id: tenantDomains.id })
      .from(tenantDomains)
      .where(eq(tenantDomains.id, domain.id));
    if (row) return; // another process took over after our lease ran out; it owns the result
    const [owner] = await db
      .select({ id: tenantDomains.id })
      .from(tenantDomains)
      .where(and(eq(tenantDomains.hostname, domain.hostname), eq(tenantDomains.status, "Active")));
    if (owner) return; // the entry serves the tenant that owns the name
    await gw.remove({ id: gatewayId, hostname: domain.hostname }).catch((error: unknown) =>
      deps.logger.warn("could not remove the gateway entry of a deleted domain", {
        hostname: domain.hostname,
        error: (error as Error).message,
      }),
    );
  }

  /** An Active domain whose certificate is not issued yet: refresh the gateway's statuses. */
  async function refreshTls(domain: ClaimedDomain, gw: GatewayClient) {
    const now = deps.clock.now();
    const attempts = domain.checkAttempts + 1;
    try {
      const entry =
        (domain.gatewayHostnameId ? await gw.get(domain.gatewayHostnameId) : null) ??
        (await gw.ensure(domain.hostname));
      const stored = await finish(domain, {
        gatewayHostnameId: entry.id,
        gatewayStatus: entry.status,
        tlsStatus: entry.sslStatus,
        lastCheckedAt: now,
        checkAttempts: attempts,
        nextCheckAt: new Date(now.getTime() + retryDelayMs(settings, attempts)),
      });
      // deleted meanwhile: its removal may have run before `ensure` registered it again
      if (!stored) await abandoned(domain, gw, entry.id);
      return { status: "Active" as const, code: null };
    } catch (error) {
      deps.logger.warn("tenant domain TLS status not refreshed", {
        domainId: domain.id,
        error: (error as Error).message,
      });
      await finish(domain, {
        lastCheckedAt: now,
        checkAttempts: attempts,
        nextCheckAt: new Date(now.getTime() + retryDelayMs(settings, attempts)),
      });
      return { status: "Active" as const, code: "gateway_error" };
    }
  }

  return {
    owner,
    async tick() {
      await expireDomainClaims(deps, settings.BatchSize);
      if (missing.length > 0 || !gateway) {
        if (!toldIncomplete) {
          toldIncomplete = true;
          deps.logger.warn("tenant domains are not verified: configuration incomplete", { missing });
        }
        return 0;
      }
      const claimed = await claimDueDomains(db, {
        owner,
        now: deps.clock.now(),
        leaseMs: settings.LeaseSeconds * 1000,
        limit: settings.BatchSize,
      });
      const queue = [...claimed];
      const services = { resolver, gateway };
      const worker = async () => {
        for (let domain = queue.shift(); domain; domain = queue.shift()) {
          try {
            const result =
              domain.status === "Active" ? await refreshTls(domain, gateway) : await verify(domain, services);
            options.onChecked?.(domain, result);
          } catch (error) {
            // the lease runs out and the domain is checked again; the others of the batch go on
            deps.logger.error("tenant domain check crashed", {
              domainId: domain.id,
              error: (error as Error).message,
            });
          }
        }
      };
      await Promise.all(Array.from({ length: Math.min(PARALLEL_CHECKS, claimed.length) }, worker));
      return claimed.length;
    },
  };
}
