import { and, eq, gt, isNull, or, type SQL, sql } from "drizzle-orm";
import { recordAudit } from "../audit/record.ts";
import type { Ctx } from "../context.ts";
import type { Tx } from "../db/client.ts";
import { creationOrder } from "../db/keyset.ts";
import { withDatabase, withTransaction } from "../db/operation.ts";
import { tenants, trustedDevices, users } from "../db/schema/index.ts";
import { AppError } from "../errors.ts";
import {
  createdAtPosition,
  cursorCodec,
  type Page,
  type PageRequest,
  pageByCreation,
} from "../pagination.ts";
import type { AuthDeps } from "./deps.ts";
import { opaqueToken, safeEqual, tokenHash } from "./opaque-tokens.ts";
import { callerOf, type SignIn } from "./sessions.ts";

/** Data-protection purpose of the trusted-device cookie: no other sealed value opens as one. */
const COOKIE_PURPOSE = "trusted-device";

/** The first factors a trusted device lets skip the step (not a switch, an invitation or a sign-up). */
const SKIPPING_METHODS: ReadonlySet<SignIn["method"]> = new Set([
  "password",
  "email_code",
  "email_link",
  "sms",
]);

/** A trusted device as its user sees it: never its secret. */
export interface TrustedDeviceView {
  id: string;
  /** The `User-Agent` that trusted it, or null. */
  client: string | null;
  /** The address that trusted it, or null. */
  address: string | null;
  createdAt: Date;
  lastUsedAt: Date | null;
  expiresAt: Date;
}

/** The cookie a trust answers: the sealed value and its lifetime in seconds. */
export interface TrustedDeviceCookie {
  value: string;
  maxAge: number;
}

/** Rows that still let a sign-in skip the step at `now`. */
const usable = (now: Date): SQL | undefined =>
  and(isNull(trustedDevices.revokedAt), gt(trustedDevices.expiresAt, now));

/**
 * Trusts the browser that completed a sign-in step (`trustDevice: true`): a row with the SHA-256 of a
 * fresh 256-bit secret, expiring `Authentication:Mfa:TrustedDeviceDays` from now, audited as
 * `mfa.device_trusted`; answers the sealed cookie value (`id.secret` under data protection). Null, and
 * nothing stored, where there is nothing to trust: platform staff (no tenant) or a tenant whose policy
 * does not allow trusted devices.
 */
export async function trustDevice(deps: AuthDeps, signIn: SignIn): Promise<TrustedDeviceCookie | null> {
  const { userId, tenantId } = signIn.identity;
  if (tenantId === null) return null;
  const ctx: Ctx = { ...signIn.ctx, tenantId };
  const now = deps.clock.now();
  const days = deps.config.settings.Authentication.Mfa.TrustedDeviceDays;
  const expiresAt = new Date(now.getTime() + days * 86_400_000);
  const secret = opaqueToken();
  const id = await withTransaction(deps, ctx, async (tx, txCtx) => {
    const [tenant] = await tx
      .select({ allowed: tenants.allowTrustedDevices })
      .from(tenants)
      .where(eq(tenants.id, tenantId));
    if (!tenant?.allowed) return null;
    const [row] = await tx
      .insert(trustedDevices)
      .values({
        tenantId,
        userId,
        secretHash: tokenHash(secret),
        userAgent: ctx.userAgent ?? null,
        clientIp: ctx.clientIp ?? null,
        createdAt: now,
        expiresAt,
      })
      .returning({ id: trustedDevices.id });
    if (!row) throw new Error("trusted device insert returned nothing");
    await recordAudit(tx, txCtx, {
      action: "mfa.device_trusted",
      target: { type: "trusted_device", id: row.id },
      details: { userId, expiresAt },
    });
    return row.id;
  });
  if (!id) return null;
  const value = await deps.dataProtection.forPurpose(COOKIE_PURPOSE).protect(`${id}.${secret}`);
  return { value, maxAge: days * 86_400 };
}

/**
 * Whether the sign-in may skip the second-factor step on the trusted-device cookie its request carried
 * (`ctx.trustedDeviceCookie`): a first factor that may (a password, an e-mailed code or link, an SMS
 * code), a cookie that opens, names an unrevoked, unexpired device of this very user in this very tenant
 * whose secret matches (constant time), trusted after the user's last password change, while the tenant
 * allows trusted devices. The device's last use is recorded. Anything else: false, and the step is taken.
 */
export async function trustedDeviceSkips(deps: AuthDeps, signIn: SignIn): Promise<boolean> {
  const sealed = signIn.ctx.trustedDeviceCookie;
  const { userId, tenantId } = signIn.identity;
  if (!sealed || tenantId === null || !SKIPPING_METHODS.has(signIn.method)) return false;
  const opened = await deps.dataProtection
    .forPurpose(COOKIE_PURPOSE)
    .unprotect(sealed)
    .catch(() => null);
  const [id, secret] = opened?.split(".") ?? [];
  if (!id || !secret || !/^[0-9a-f-]{36}$/.test(id)) return false;
  const now = deps.clock.now();
  const ctx: Ctx = { ...signIn.ctx, tenantId };
  return withTransaction(deps, ctx, async (tx) => {
    const [device] = await tx
      .select({ secretHash: trustedDevices.secretHash })
      .from(trustedDevices)
      .innerJoin(tenants, eq(tenants.id, trustedDevices.tenantId))
      .innerJoin(users, eq(users.id, trustedDevices.userId))
      .where(
        and(
          eq(trustedDevices.id, id),
          eq(trustedDevices.tenantId, tenantId),
          eq(trustedDevices.userId, userId),
          usable(now),
          eq(tenants.allowTrustedDevices, true),
          // a password changed (or reset) since voids it, in every tenant of a shared identity
          or(isNull(users.passwordChangedAt), gt(trustedDevices.createdAt, users.passwordChangedAt)),
        ),
      )
      .limit(1);
    if (!device || !safeEqual(tokenHash(secret), device.secretHash)) return false;
    await tx
      .update(trustedDevices)
      .set({ lastUsedAt: now, lastUsedIp: ctx.clientIp ?? null })
      .where(eq(trustedDevices.id, id));
    return true;
  });
}

/** `GET /api/auth/mfa/trusted-devices`: the caller's usable trusted devices in the ctx's tenant, newest first. */
export async function listTrustedDevices(
  deps: AuthDeps,
  ctx: Ctx,
  input: PageRequest = { limit: 50 },
): Promise<Page<TrustedDeviceView>> {
  const { userId } = callerOf(ctx);
  const tenantId = ctx.tenantId;
  if (tenantId === null) return { items: [], nextCursor: null };
  const after = deviceCursor.decodeOptional(input.cursor);
  const keyset = creationOrder(trustedDevices, "desc", after);
  const rows = await withDatabase(deps, ctx, (db) =>
    db
      .select({
        id: trustedDevices.id,
        client: trustedDevices.userAgent,
        address: trustedDevices.clientIp,
        createdAt: trustedDevices.createdAt,
        lastUsedAt: trustedDevices.lastUsedAt,
        expiresAt: trustedDevices.expiresAt,
        position: keyset.position,
      })
      .from(trustedDevices)
      .where(
        and(
          eq(trustedDevices.tenantId, tenantId),
          eq(trustedDevices.userId, userId),
          usable(deps.clock.now()),
          keyset.past,
        ),
      )
      .orderBy(...keyset.orderBy)
      .limit(input.limit + 1),
  );
  return pageByCreation(rows, input.limit, (row) => row, deviceCursor);
}
const deviceCursor = cursorCodec(createdAtPosition);

/** `DELETE /api/auth/mfa/trusted-devices/{id}`: the caller revokes one of their own (another's is 404). */
export async function revokeTrustedDevice(deps: AuthDeps, ctx: Ctx, input: { id: string }): Promise<void> {
  const { userId } = callerOf(ctx);
  const tenantId = ctx.tenantId;
  const revoked =
    tenantId === null
      ? 0
      : await withTransaction(deps, ctx, (tx, txCtx) =>
          revokeTrustedDevices(tx, txCtx, deps.clock.now(), {
            where: and(
              eq(trustedDevices.id, input.id),
              eq(trustedDevices.tenantId, tenantId),
              eq(trustedDevices.userId, userId),
            ),
            reason: "revoked by its user",
          }),
        );
  if (revoked === 0) throw new AppError("not_found", "No trusted device of yours has this id.");
}

/**
 * Revokes the usable trusted devices `where` selects (within what the transaction's tenant context
 * admits), each audited as `mfa.trusted_device_revoked` with the reason, in the caller's transaction:
 * a factor reset, a password change, signing out everywhere, the policy switched off, a user disabled
 * or removed. Answers how many.
 */
export async function revokeTrustedDevices(
  tx: Tx,
  ctx: Ctx,
  now: Date,
  input: { where: SQL | undefined; reason: string },
): Promise<number> {
  const revoked = await tx
    .update(trustedDevices)
    .set({ revokedAt: now, revokedReason: input.reason })
    .where(and(input.where, usable(now)))
    .returning({ id: trustedDevices.id, tenantId: trustedDevices.tenantId, userId: trustedDevices.userId });
  for (const device of revoked)
    await recordAudit(tx, ctx, {
      action: "mfa.trusted_device_revoked",
      target: { type: "trusted_device", id: device.id },
      details: { userId: device.userId, reason: input.reason },
      tenantId: device.tenantId,
    });
  return revoked.length;
}

/** The `where` of one user's devices in one tenant (for `revokeTrustedDevices`). */
export const devicesOf = (userId: string, tenantId: string | null): SQL | undefined =>
  tenantId === null
    ? sql`false`
    : and(eq(trustedDevices.userId, userId), eq(trustedDevices.tenantId, tenantId));
