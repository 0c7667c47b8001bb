import { and, asc, eq, gt } from "drizzle-orm";
import { z } from "zod";
import { recordAudit } from "../audit/record.ts";
import type { Clock } from "../clock.ts";
import type { TenantCtx } from "../context.ts";
import type { Executor } from "../db/client.ts";
import { type DatabaseDeps, withDatabase, withTransaction } from "../db/operation.ts";
import {
  type ProviderStatus,
  type ProviderType,
  providerStatuses,
  providerTypes,
  tenantExternalProviders,
} from "../db/schema/providers.ts";
import { AppError } from "../errors.ts";
import { cursorCodec, type Page, type PageRequest, pageOf } from "../pagination.ts";
import type { TenantSecretKeyring } from "../security/tenant-secrets.ts";
import { getTenant } from "../tenancy/tenants.ts";
import { credentialValuePaths } from "./setting-values.ts";
import { readTenantSecret, SECRET_NAME } from "./tenant-secret-store.ts";

export { type ProviderStatus, type ProviderType, providerStatuses, providerTypes };

export interface TenantProvider {
  tenantId: string;
  type: ProviderType;
  provider: string;
  status: ProviderStatus;
  settings: Record<string, unknown>;
  secretRefs: Record<string, string>;
  createdAt: Date;
  updatedAt: Date;
}

/** A platform-wide provider configuration used for tenants that have no row of that type. */
export interface GlobalProviderDefault {
  provider: string;
  settings: Record<string, unknown>;
}

export type ResolvedProvider =
  | { source: "tenant"; provider: TenantProvider }
  | { source: "global"; provider: GlobalProviderDefault }
  | null;

/**
 * Setting names that look like they hold a secret value, at any depth: those go to tenant secrets,
 * referenced by name. Words may be joined by `-`, `_`, `.` or a space, or camel-cased.
 */
const SECRET_LOOKING =
  /pass(?:word|phrase|wd)?|pwd|secret|token|credential|(?:api|private|access|auth|signing|encryption|master)[-_. ]?key/i;

/** Paths (`settings.auth.apiKey`, `settings.keys[0].token`) of every secret-looking name in the settings. */
function secretLookingPaths(settings: Record<string, unknown>): string[] {
  const found: string[] = [];
  // iterative walk: a deeply nested body must not exhaust the stack
  const pending: { path: string; value: unknown }[] = [{ path: "settings", value: settings }];
  for (let next = pending.pop(); next; next = pending.pop()) {
    const { path, value } = next;
    if (Array.isArray(value))
      for (const [i, item] of value.entries()) pending.push({ path: `${path}[${i}]`, value: item });
    else if (value !== null && typeof value === "object")
      for (const [key, child] of Object.entries(value)) {
        if (SECRET_LOOKING.test(key)) found.push(`${path}.${key}`);
        else pending.push({ path: `${path}.${key}`, value: child });
      }
  }
  return found.sort();
}

const columns = {
  tenantId: tenantExternalProviders.tenantId,
  type: tenantExternalProviders.type,
  provider: tenantExternalProviders.provider,
  status: tenantExternalProviders.status,
  settings: tenantExternalProviders.settings,
  secretRefs: tenantExternalProviders.secretRefs,
  createdAt: tenantExternalProviders.createdAt,
  updatedAt: tenantExternalProviders.updatedAt,
};

function checkInput(input: { settings: Record<string, unknown>; secretRefs: Record<string, string> }): void {
  const errors = [
    ...secretLookingPaths(input.settings).map((path) => ({
      path,
      message: "looks like a secret: store it as a tenant secret and reference it in secretRefs",
    })),
    ...credentialValuePaths(input.settings).map((path) => ({
      path,
      message:
        "carries a credential (URL userinfo or a secret-looking query parameter): store it as a tenant secret and reference it in secretRefs",
    })),
    ...Object.entries(input.secretRefs)
      .filter(([, name]) => !SECRET_NAME.test(name))
      .map(([key]) => ({ path: `secretRefs.${key}`, message: "must be a tenant secret name" })),
  ];
  if (errors.length > 0)
    throw new AppError("validation_failed", "The provider settings are not valid.", { fields: errors });
}

export interface ProviderDeps extends DatabaseDeps {
  clock: Clock;
}

export interface PutTenantProviderInput {
  type: ProviderType;
  provider: string;
  status: ProviderStatus;
  settings: Record<string, unknown>;
  secretRefs: Record<string, string>;
}

/** Creates or replaces the ctx tenant's provider of one type. */
export async function putTenantProvider(
  deps: ProviderDeps,
  ctx: TenantCtx,
  input: PutTenantProviderInput,
): Promise<TenantProvider> {
  checkInput(input);
  const { tenantId } = ctx;
  const now = deps.clock.now();
  const values = {
    provider: input.provider,
    status: input.status,
    settings: input.settings,
    secretRefs: input.secretRefs,
    updatedAt: now,
  };
  return withTransaction(deps, ctx, async (tx, ctx) => {
    await getTenant(deps, ctx, { tenantId });
    const [row] = await tx
      .insert(tenantExternalProviders)
      .values({ tenantId, type: input.type, ...values, createdAt: now })
      .onConflictDoUpdate({
        target: [tenantExternalProviders.tenantId, tenantExternalProviders.type],
        set: values,
      })
      .returning(columns);
    if (!row) throw new Error("upsert returned no row");
    await recordAudit(tx, ctx, {
      action: "provider.set",
      target: { type: "provider", id: input.type },
      details: { kind: input.type, provider: input.provider, status: input.status },
    });
    return row;
  });
}

/** A position in a tenant's provider list: the last type seen (keyset). */
const providerCursor = cursorCodec(z.object({ type: z.enum(providerTypes) }));

/** The ctx tenant's providers by type (one per type at most), a page at a time. */
export async function listTenantProviders(
  deps: DatabaseDeps,
  ctx: TenantCtx,
  input: PageRequest,
): Promise<Page<TenantProvider>> {
  const after = providerCursor.decodeOptional(input.cursor)?.type;
  await getTenant(deps, ctx, { tenantId: ctx.tenantId });
  const rows = await withDatabase(deps, ctx, (db) =>
    db
      .select(columns)
      .from(tenantExternalProviders)
      .where(
        and(
          eq(tenantExternalProviders.tenantId, ctx.tenantId),
          after === undefined ? undefined : gt(tenantExternalProviders.type, after),
        ),
      )
      .orderBy(asc(tenantExternalProviders.type))
      .limit(input.limit + 1),
  );
  return pageOf(
    rows,
    input.limit,
    (row) => row,
    (row) => ({ type: row.type }),
    providerCursor,
  );
}

/** Enables or disables the ctx tenant's provider of one type (404 when it has none). */
export async function updateTenantProviderStatus(
  deps: ProviderDeps,
  ctx: TenantCtx,
  input: { type: ProviderType; status: ProviderStatus },
): Promise<TenantProvider> {
  const { tenantId } = ctx;
  const { type, status } = input;
  return withTransaction(deps, ctx, async (tx, ctx) => {
    await getTenant(deps, ctx, { tenantId });
    const [row] = await tx
      .update(tenantExternalProviders)
      .set({ status, updatedAt: deps.clock.now() })
      .where(and(eq(tenantExternalProviders.tenantId, tenantId), eq(tenantExternalProviders.type, type)))
      .returning(columns);
    if (!row) throw new AppError("not_found", "The tenant has no provider of this type.");
    await recordAudit(tx, ctx, {
      action: status === "Active" ? "provider.enabled" : "provider.disabled",
      target: { type: "provider", id: type },
      details: { kind: type, status },
    });
    return row;
  });
}

/**
 * "The <type> provider for tenant T": the tenant's own row decides whenever there is one (Active
 * → it; Disabled or Suspended → none, and the global default must not bypass that); only a tenant
 * with no row of that type falls back to the global default (or none when there is no default).
 */
export async function resolveProvider(
  db: Executor,
  tenantId: string,
  type: ProviderType,
  globalDefault: GlobalProviderDefault | null,
): Promise<ResolvedProvider> {
  const [row] = await db
    .select(columns)
    .from(tenantExternalProviders)
    .where(and(eq(tenantExternalProviders.tenantId, tenantId), eq(tenantExternalProviders.type, type)));
  if (row) return row.status === "Active" ? { source: "tenant", provider: row } : null;
  return globalDefault ? { source: "global", provider: globalDefault } : null;
}

/**
 * Decrypts the secrets a tenant provider references (setting name → value), for the provider call
 * itself. A reference to a missing secret is an error naming the setting, not the value.
 */
export async function readProviderSecrets(
  db: Executor,
  keyring: TenantSecretKeyring,
  provider: TenantProvider,
): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const [setting, name] of Object.entries(provider.secretRefs)) {
    const value = await readTenantSecret(db, keyring, provider.tenantId, name);
    if (value === null)
      throw new Error(
        `provider ${provider.type} of tenant ${provider.tenantId}: secret "${name}" (${setting}) is missing`,
      );
    out[setting] = value;
  }
  return out;
}
