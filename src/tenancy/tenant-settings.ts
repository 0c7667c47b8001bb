import { eq } from "drizzle-orm";
import { recordAudit } from "../audit/record.ts";
import type { Clock } from "../clock.ts";
import type { TenantCtx } from "../context.ts";
import { type DatabaseDeps, withDatabase, withTransaction } from "../db/operation.ts";
import { tenants } from "../db/schema/tenants.ts";
import { AppError } from "../errors.ts";
import { isUuid } from "./tenants.ts";

/** What a tenant decides about its own sign-ins (docs/auth.md, "Tenant settings"). */
export interface TenantSettings {
  /** Its invitees get identities of its own pool, never a shared one (docs/decisions.md). */
  privateIdentities: boolean;
  /** Its members may sign in with a code or link mailed to their address. */
  emailSignIn: boolean;
}

const columns = { privateIdentities: tenants.privateIdentities, emailSignIn: tenants.emailSignIn };
const noSuchTenant = () => new AppError("not_found", "No such tenant.");

/** The settings of `ctx.tenantId`; 404 for no such tenant. */
export async function getTenantSettings(deps: DatabaseDeps, ctx: TenantCtx): Promise<TenantSettings> {
  if (!isUuid(ctx.tenantId)) throw noSuchTenant();
  const [row] = await withDatabase(deps, ctx, (db) =>
    db.select(columns).from(tenants).where(eq(tenants.id, ctx.tenantId)),
  );
  if (!row) throw noSuchTenant();
  return row;
}

/**
 * Changes the settings given (the others stay) and records `tenant.settings_changed` with the
 * values before and after, in one transaction. A change applies to what happens next: turning
 * `privateIdentities` on does not take shared identities that are members already out of the
 * tenant; turning `emailSignIn` off makes codes and links already mailed useless at once.
 */
export async function updateTenantSettings(
  deps: DatabaseDeps & { clock: Clock },
  ctx: TenantCtx,
  input: Partial<TenantSettings>,
): Promise<TenantSettings> {
  if (!isUuid(ctx.tenantId)) throw noSuchTenant();
  return withTransaction(deps, ctx, async (tx, txCtx) => {
    const [before] = await tx.select(columns).from(tenants).where(eq(tenants.id, ctx.tenantId)).for("update");
    if (!before) throw noSuchTenant();
    const changes = Object.fromEntries(
      Object.entries(input).filter(
        ([key, value]) => value !== undefined && before[key as keyof TenantSettings] !== value,
      ),
    ) as Partial<TenantSettings>;
    if (Object.keys(changes).length === 0) return before;
    const [after] = await tx
      .update(tenants)
      .set({ ...changes, updatedAt: deps.clock.now() })
      .where(eq(tenants.id, ctx.tenantId))
      .returning(columns);
    if (!after) throw noSuchTenant();
    await recordAudit(tx, txCtx, {
      action: "tenant.settings_changed",
      target: { type: "tenant", id: ctx.tenantId },
      details: { changed: Object.keys(changes), ...changes },
    });
    return after;
  });
}
