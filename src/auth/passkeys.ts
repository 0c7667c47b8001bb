import {
  generateRegistrationOptions,
  type RegistrationResponseJSON,
  verifyRegistrationResponse,
} from "@simplewebauthn/server";
import { isoBase64URL } from "@simplewebauthn/server/helpers";
import { and, count, eq } from "drizzle-orm";
import { recordAudit } from "../audit/record.ts";
import type { Ctx } from "../context.ts";
import type { Executor } from "../db/client.ts";
import { creationOrder } from "../db/keyset.ts";
import { withTenantOrPlatformDatabase, withTransactionOrPlatform } from "../db/operation.ts";
import { passkeys, users } from "../db/schema/index.ts";
import { AppError } from "../errors.ts";
import { emitEvent } from "../events/outbox.ts";
import { enqueueContext } from "../jobs/enqueue.ts";
import {
  createdAtPosition,
  cursorCodec,
  type Page,
  type PageRequest,
  pageByCreation,
} from "../pagination.ts";
import type { AuthDeps } from "./deps.ts";
import { normaliseOrigin } from "./origins.ts";
import { callerOf } from "./sessions.ts";
import {
  consumeSingleUseToken,
  issueSingleUseToken,
  type SingleUseTokenPurpose,
} from "./single-use-tokens.ts";
import { requireRecentSecondFactor } from "./step-up.ts";
import { sameTenant } from "./user-identity.ts";

/** Passkeys one user may hold in one tenant (or on the platform): one page of the list. */
export const MAX_PASSKEYS = 25;
/** How long a ceremony's challenge can be answered (the browser's own timeout is the same). */
export const challengeSecondsOf = (deps: Pick<AuthDeps, "config">) =>
  deps.config.settings.Authentication.Passkeys.ChallengeSeconds;

export type PasskeyDeps = AuthDeps;

/** A passkey as its owner sees it: no key material. */
export interface PasskeyView {
  id: string;
  name: string;
  rpId: string;
  backupEligible: boolean;
  backedUp: boolean;
  createdAt: Date;
  lastUsedAt: Date | null;
}

const viewColumns = {
  id: passkeys.id,
  name: passkeys.name,
  rpId: passkeys.rpId,
  backupEligible: passkeys.backupEligible,
  backedUp: passkeys.backedUp,
  createdAt: passkeys.createdAt,
  lastUsedAt: passkeys.lastUsedAt,
};

/** Where a page of passkeys ends: the last one's creation time (PostgreSQL's exact text) and id. */
const passkeyCursor = cursorCodec(createdAtPosition);

/** The WebAuthn user handle of a user: the 16 bytes of their id (no e-mail, nothing personal). */
export function userHandleOf(userId: string): Uint8Array<ArrayBuffer> {
  return new Uint8Array(Buffer.from(userId.replaceAll("-", ""), "hex"));
}

/**
 * Whether a ceremony's origin belongs to the relying party `rpId` (the host the request came to):
 * that very host over HTTPS (any port), or a subdomain of it listed in `BrowserAuth:AllowedOrigins`;
 * plain HTTP only for `localhost` and `*.localhost`, which browsers treat as secure.
 */
export function passkeyOriginAllowed(deps: Pick<AuthDeps, "config">, rpId: string, origin: string): boolean {
  if (!URL.canParse(origin)) return false;
  const url = new URL(origin);
  const local = url.hostname === "localhost" || url.hostname.endsWith(".localhost");
  if (url.protocol !== "https:" && !(url.protocol === "http:" && local)) return false;
  if (url.hostname === rpId) return true;
  if (!url.hostname.endsWith(`.${rpId}`)) return false;
  return deps.config.settings.BrowserAuth.AllowedOrigins.map(normaliseOrigin).includes(url.origin);
}

/** What a ceremony's answer says in its client data: the challenge and the origin (null: not readable). */
export function clientDataOf(clientDataJSON: string): { challenge: string; origin: string } | null {
  try {
    const data = JSON.parse(isoBase64URL.toUTF8String(clientDataJSON)) as Record<string, unknown>;
    if (typeof data.challenge !== "string" || typeof data.origin !== "string") return null;
    return { challenge: data.challenge, origin: data.origin };
  } catch {
    return null;
  }
}

/** A fresh challenge, stored only as its hash (single use, `Passkeys:ChallengeSeconds`), bound to the host. */
export async function issueChallenge(
  deps: PasskeyDeps,
  ctx: Ctx,
  input: { purpose: SingleUseTokenPurpose; rpId: string; userId?: string },
): Promise<{ challenge: string; bytes: Uint8Array<ArrayBuffer> }> {
  const { token } = await issueSingleUseToken(deps, ctx, {
    purpose: input.purpose,
    tenantId: ctx.tenantId,
    userId: input.userId ?? null,
    subject: input.rpId,
    lifetimeSeconds: challengeSecondsOf(deps),
  });
  return { challenge: token, bytes: new Uint8Array(isoBase64URL.toBuffer(token)) };
}

/**
 * Spends the challenge an answer carries, once, if it was issued for `purpose` in the ctx's tenant,
 * on this host (and to this user when given), and the answer comes from an origin of the host.
 * Null otherwise: the caller refuses all of these alike.
 */
export async function spendChallenge(
  deps: PasskeyDeps,
  ctx: Ctx,
  input: { purpose: SingleUseTokenPurpose; rpId: string; clientDataJSON: string; userId?: string },
): Promise<{ challenge: string; origin: string } | null> {
  const data = clientDataOf(input.clientDataJSON);
  if (!data || data.challenge.length > 128) return null;
  if (!passkeyOriginAllowed(deps, input.rpId, data.origin)) return null;
  const spent = await consumeSingleUseToken(deps, ctx, {
    purpose: input.purpose,
    token: data.challenge,
    tenantId: ctx.tenantId,
  });
  if (!spent || spent.subject !== input.rpId) return null;
  if (input.userId !== undefined && spent.userId !== input.userId) return null;
  return data;
}

/**
 * The options of `navigator.credentials.create()` for the caller on host `rpId`: a discoverable
 * credential (a passkey: usernameless sign-in) with user verification, none of the caller's
 * passkeys on this host again. A user who has a second factor already steps up first.
 */
export async function startPasskeyRegistration(deps: PasskeyDeps, ctx: Ctx, input: { rpId: string }) {
  const { userId } = callerOf(ctx);
  // enrolling a factor: a user who has one proves it again first (RFC 9470 step-up)
  await requireRecentSecondFactor(deps, ctx);
  const [user] = await withTenantOrPlatformDatabase(deps, ctx, ctx.tenantId, (db) =>
    db.select({ email: users.email, name: users.name }).from(users).where(eq(users.id, userId)),
  );
  if (!user) throw new AppError("unauthorized");
  const existing = await withTenantOrPlatformDatabase(deps, ctx, ctx.tenantId, (db) =>
    db
      .select({ credentialId: passkeys.credentialId, transports: passkeys.transports })
      .from(passkeys)
      .where(
        and(
          eq(passkeys.userId, userId),
          sameTenant(passkeys.tenantId, ctx.tenantId),
          eq(passkeys.rpId, input.rpId),
        ),
      ),
  );
  const { bytes } = await issueChallenge(deps, ctx, {
    purpose: "passkey_registration",
    rpId: input.rpId,
    userId,
  });
  return generateRegistrationOptions({
    rpName: deps.config.settings.Authentication.Passkeys.RelyingPartyName,
    rpID: input.rpId,
    userName: user.email,
    userDisplayName: user.name,
    userID: userHandleOf(userId),
    challenge: bytes,
    timeout: challengeSecondsOf(deps) * 1000,
    attestationType: "none",
    excludeCredentials: existing.map((p) => ({ id: p.credentialId, transports: p.transports })),
    authenticatorSelection: {
      residentKey: "required",
      requireResidentKey: true,
      userVerification: "required",
    },
  });
}

/** The registration answer refused: the same words whatever failed. */
const notVerified = () => new AppError("bad_request", "The passkey could not be verified; start again.");

/**
 * Verifies the answer of `navigator.credentials.create()` against the challenge issued to the
 * caller on this host and stores the passkey (public key, counter, backup flags) under `name`.
 * Audited as `passkey.registered`; tenant users' also emit the `passkey.registered` event.
 */
export async function finishPasskeyRegistration(
  deps: PasskeyDeps,
  ctx: Ctx,
  input: { rpId: string; name: string; response: RegistrationResponseJSON },
): Promise<PasskeyView> {
  const { userId } = callerOf(ctx);
  const spent = await spendChallenge(deps, ctx, {
    purpose: "passkey_registration",
    rpId: input.rpId,
    clientDataJSON: input.response.response.clientDataJSON,
    userId,
  });
  // no ceremony of the caller's on this host holds the answer's challenge (made up, expired, used):
  // nothing to verify, as a dead mailed link is a 404
  if (!spent)
    throw new AppError(
      "not_found",
      "No passkey registration waits for this answer (expired or used); start again.",
    );
  const verified = await verifyRegistrationResponse({
    response: input.response,
    expectedChallenge: spent.challenge,
    expectedOrigin: spent.origin,
    expectedRPID: input.rpId,
    requireUserVerification: true,
  }).catch(() => null);
  if (!verified?.verified) throw notVerified();
  const info = verified.registrationInfo;
  const now = deps.clock.now();
  return withTransactionOrPlatform(deps, ctx, async (tx) => {
    const [held] = await tx
      .select({ n: count() })
      .from(passkeys)
      .where(and(eq(passkeys.userId, userId), sameTenant(passkeys.tenantId, ctx.tenantId)));
    if ((held?.n ?? 0) >= MAX_PASSKEYS)
      throw new AppError("conflict", `At most ${MAX_PASSKEYS} passkeys per user: remove one first.`);
    const [row] = await tx
      .insert(passkeys)
      .values({
        tenantId: ctx.tenantId,
        userId,
        name: input.name,
        rpId: input.rpId,
        credentialId: info.credential.id,
        publicKey: isoBase64URL.fromBuffer(info.credential.publicKey),
        counter: info.credential.counter,
        transports: info.credential.transports ?? [],
        aaguid: info.aaguid,
        backupEligible: info.credentialDeviceType === "multiDevice",
        backedUp: info.credentialBackedUp,
        createdAt: now,
      })
      .onConflictDoNothing()
      .returning(viewColumns);
    if (!row) throw new AppError("conflict", "This passkey is registered already.");
    await recordPasskeyChange(deps, tx, ctx, "passkey.registered", { ...row, userId });
    return row;
  });
}

/** The caller's passkeys in the ctx's tenant (all hosts), oldest first. */
export async function listPasskeys(
  deps: PasskeyDeps,
  ctx: Ctx,
  input: PageRequest = { limit: MAX_PASSKEYS },
): Promise<Page<PasskeyView>> {
  const { userId } = callerOf(ctx);
  const after = passkeyCursor.decodeOptional(input.cursor);
  const keyset = creationOrder(passkeys, "asc", after);
  const rows = await withTenantOrPlatformDatabase(deps, ctx, ctx.tenantId, (db) =>
    db
      .select({ ...viewColumns, position: keyset.position })
      .from(passkeys)
      .where(and(eq(passkeys.userId, userId), sameTenant(passkeys.tenantId, ctx.tenantId), keyset.past))
      .orderBy(...keyset.orderBy)
      .limit(input.limit + 1),
  );
  return pageByCreation(rows, input.limit, (row) => row, passkeyCursor);
}

const ownPasskey = (ctx: Ctx, id: string) => {
  const { userId } = callerOf(ctx);
  return and(eq(passkeys.id, id), eq(passkeys.userId, userId), sameTenant(passkeys.tenantId, ctx.tenantId));
};
const noSuchPasskey = () => new AppError("not_found", "No passkey of yours has this id.");

/** Renames one of the caller's passkeys; 404 for any other id. Audited as `passkey.renamed`. */
export async function renamePasskey(
  deps: PasskeyDeps,
  ctx: Ctx,
  input: { id: string; name: string },
): Promise<PasskeyView> {
  return withTransactionOrPlatform(deps, ctx, async (tx) => {
    const [row] = await tx
      .update(passkeys)
      .set({ name: input.name })
      .where(ownPasskey(ctx, input.id))
      .returning(viewColumns);
    if (!row) throw noSuchPasskey();
    await recordAudit(tx, ctx, {
      action: "passkey.renamed",
      target: { type: "passkey", id: row.id },
      details: { name: row.name },
    });
    return row;
  });
}

/**
 * Removes one of the caller's passkeys, after a recent second factor (step-up); 404 for any other id. Audited as `passkey.removed`; tenant
 * users' also emit the `passkey.removed` event.
 */
export async function removePasskey(deps: PasskeyDeps, ctx: Ctx, input: { id: string }): Promise<void> {
  const { userId } = callerOf(ctx);
  await requireRecentSecondFactor(deps, ctx);
  await withTransactionOrPlatform(deps, ctx, async (tx) => {
    const [row] = await tx
      .delete(passkeys)
      .where(ownPasskey(ctx, input.id))
      .returning({ id: passkeys.id, name: passkeys.name, rpId: passkeys.rpId });
    if (!row) throw noSuchPasskey();
    await recordPasskeyChange(deps, tx, ctx, "passkey.removed", { ...row, userId });
  });
}

/**
 * A passkey registered or removed, in the change's transaction: the audit row of that name and, for
 * a tenant user, the webhook event of the same name.
 */
async function recordPasskeyChange(
  deps: PasskeyDeps,
  tx: Executor,
  ctx: Ctx,
  change: "passkey.registered" | "passkey.removed",
  passkey: { id: string; name: string; rpId: string; userId: string },
): Promise<void> {
  const { id, name, rpId, userId } = passkey;
  await recordAudit(tx, ctx, {
    action: change,
    target: { type: "passkey", id },
    details: { name, hostname: rpId, userId },
  });
  if (ctx.tenantId)
    await emitEvent(tx, enqueueContext(deps), {
      tenantId: ctx.tenantId,
      type: change,
      data: { userId, passkeyId: id, name },
    });
}
