import {
  type AuthenticationResponseJSON,
  generateAuthenticationOptions,
  verifyAuthenticationResponse,
} from "@simplewebauthn/server";
import { isoBase64URL } from "@simplewebauthn/server/helpers";
import { and, eq } from "drizzle-orm";
import type { Ctx } from "../context.ts";
import { withTenantOrPlatformDatabase, withTransactionOrPlatform } from "../db/operation.ts";
import { passkeys, tenants } from "../db/schema/index.ts";
import type { FactorCheck } from "./mfa-step.ts";
import {
  challengeSecondsOf,
  issueChallenge,
  type PasskeyDeps,
  spendChallenge,
  userHandleOf,
} from "./passkeys.ts";
import { recordSignInFailure } from "./password-sign-in.ts";
import { invalidCredentials, type SignIn } from "./sessions.ts";
import { loadIdentity, sameTenant } from "./user-identity.ts";

/**
 * The options of `navigator.credentials.get()` on host `rpId`. Without a user, a usernameless
 * sign-in: no credential listed, so the authenticator offers its discoverable ones (conditional UI
 * included). With one (the second factor of a sign-in step, a step-up), that user's passkeys on
 * this host, and the challenge is bound to them. User verification is required. A challenge of a
 * tenant that does not exist (an unknown code) is not stored: its answer fails like any other.
 */
export async function startPasskeySignIn(
  deps: PasskeyDeps,
  ctx: Ctx,
  input: { rpId: string; userId?: string },
) {
  const tenantId = ctx.tenantId;
  const known =
    tenantId === null ||
    (await withTenantOrPlatformDatabase(deps, ctx, ctx.tenantId, (db) =>
      db.select({ id: tenants.id }).from(tenants).where(eq(tenants.id, tenantId)).limit(1),
    ).then((rows) => rows.length > 0));
  const challenge = known
    ? (
        await issueChallenge(deps, ctx, {
          purpose: "passkey_sign_in",
          rpId: input.rpId,
          userId: input.userId,
        })
      ).bytes
    : crypto.getRandomValues(new Uint8Array(32));
  const { userId } = input;
  const allowed =
    userId === undefined
      ? []
      : await withTenantOrPlatformDatabase(deps, ctx, ctx.tenantId, (db) =>
          db
            .select({ id: passkeys.credentialId, transports: passkeys.transports })
            .from(passkeys)
            .where(
              and(
                eq(passkeys.userId, userId),
                eq(passkeys.rpId, input.rpId),
                sameTenant(passkeys.tenantId, tenantId),
              ),
            ),
        );
  return generateAuthenticationOptions({
    rpID: input.rpId,
    challenge,
    allowCredentials: allowed,
    timeout: challengeSecondsOf(deps) * 1000,
    userVerification: "required",
  });
}

/** The RFC 8176 `amr` value of a passkey: `swk` for a synced (backup-eligible) one, else `hwk`. */
export const passkeyAmr = (backupEligible: boolean): "swk" | "hwk" => (backupEligible ? "swk" : "hwk");

/** What an assertion proved: the passkey's user and `amr`, or why it proved nothing. */
type Proof =
  | { proved: true; passkeyId: string; userId: string; amr: "swk" | "hwk" }
  | { proved: false; reason: string; userId: string | null };

/**
 * Verifies the answer of `navigator.credentials.get()` on the ctx's transaction when it has one: the
 * challenge issued on this host in the ctx's tenant (to `userId` when given) spent once, an origin
 * of the host, a passkey of this tenant and host (of `userId` when given) whose user handle matches,
 * its signature with user verification, and a signature counter that moved forward. A counter that
 * did not (a cloned authenticator, as the library and WebAuthn §6.1.1 warn) proves nothing and the
 * passkey is left as it was. A proof stores the counter, the backed-up flag and `lastUsedAt`.
 */
export async function proveAssertion(
  deps: PasskeyDeps,
  ctx: Ctx,
  input: { rpId: string; response: AuthenticationResponseJSON; userId?: string },
): Promise<Proof> {
  const refused = (reason: string, userId: string | null = null): Proof => ({
    proved: false,
    reason,
    userId,
  });
  const spent = await spendChallenge(deps, ctx, {
    purpose: "passkey_sign_in",
    rpId: input.rpId,
    clientDataJSON: input.response.response.clientDataJSON,
    userId: input.userId,
  });
  if (!spent) return refused("challenge unknown, used, expired or of another host");
  const [passkey] = await withTenantOrPlatformDatabase(deps, ctx, ctx.tenantId, (db) =>
    db
      .select()
      .from(passkeys)
      .where(
        and(
          eq(passkeys.rpId, input.rpId),
          eq(passkeys.credentialId, input.response.id),
          sameTenant(passkeys.tenantId, ctx.tenantId),
          input.userId === undefined ? undefined : eq(passkeys.userId, input.userId),
        ),
      )
      .limit(1),
  );
  if (!passkey) return refused("unknown passkey", input.userId ?? null);
  const handle = input.response.response.userHandle;
  if (handle && handle !== isoBase64URL.fromBuffer(userHandleOf(passkey.userId)))
    return refused("user handle mismatch", passkey.userId);
  let verified: Awaited<ReturnType<typeof verifyAuthenticationResponse>>;
  try {
    verified = await verifyAuthenticationResponse({
      response: input.response,
      expectedChallenge: spent.challenge,
      expectedOrigin: spent.origin,
      expectedRPID: input.rpId,
      credential: {
        id: passkey.credentialId,
        publicKey: isoBase64URL.toBuffer(passkey.publicKey),
        counter: passkey.counter,
        transports: passkey.transports,
      },
      requireUserVerification: true,
    });
  } catch (error) {
    const counter = error instanceof Error && /counter/i.test(error.message);
    return refused(counter ? "counter regression" : "signature not verified", passkey.userId);
  }
  if (!verified.verified) return refused("signature not verified", passkey.userId);
  const info = verified.authenticationInfo;
  // conditional on the counter read: of two answers racing with one counter, one moves it
  const moved = await withTransactionOrPlatform(deps, ctx, (tx) =>
    tx
      .update(passkeys)
      .set({ counter: info.newCounter, backedUp: info.credentialBackedUp, lastUsedAt: deps.clock.now() })
      .where(and(eq(passkeys.id, passkey.id), eq(passkeys.counter, passkey.counter)))
      .returning({ id: passkeys.id }),
  );
  if (moved.length === 0) return refused("counter regression", passkey.userId);
  return {
    proved: true,
    passkeyId: passkey.id,
    userId: passkey.userId,
    amr: passkeyAmr(passkey.backupEligible),
  };
}

/** A verified passkey sign-in: the sign-in and what the passkey was. */
export interface PasskeySignIn extends SignIn {
  passkeyId: string;
}

/**
 * Signs in with a passkey alone (`proveAssertion`, no user named: usernameless). Every failure is
 * the same 401, audited as a refused `passkey` sign-in with its reason. The session's `amr` is the
 * passkey's (`hwk` or `swk`) and `mfa`: the authenticator verified the user (a PIN or biometric) on
 * top of holding the key, so it counts as a recent second factor for step-up.
 */
export async function finishPasskeySignIn(
  deps: PasskeyDeps,
  ctx: Ctx,
  input: { rpId: string; response: AuthenticationResponseJSON },
): Promise<PasskeySignIn> {
  const refuse = async (reason: string, userId: string | null): Promise<never> => {
    await recordSignInFailure(deps, ctx, { method: "passkey", reason, userId });
    throw invalidCredentials();
  };
  const proof = await proveAssertion(deps, ctx, input);
  if (!proof.proved) return refuse(proof.reason, proof.userId);
  const identity = await withTenantOrPlatformDatabase(deps, ctx, ctx.tenantId, (db) =>
    loadIdentity(db, proof.userId, ctx.tenantId),
  );
  if (identity?.status !== "Active") return refuse("user not active", proof.userId);
  return {
    identity,
    ctx,
    method: "passkey",
    passkeyId: proof.passkeyId,
    auth: { amr: [proof.amr, "mfa"], authTime: deps.clock.now() },
  };
}

/**
 * The `FactorCheck` of a passkey (auth/mfa-step.ts): the assertion proved for the step's (or the
 * caller's) user on this host, on the step's transaction; its `amr` value, or null.
 */
export function passkeyCheck(
  deps: PasskeyDeps,
  input: { rpId: string; response: AuthenticationResponseJSON },
): { method: "passkey"; check: FactorCheck } {
  return {
    method: "passkey",
    check: async (ctx, user) => {
      const proof = await proveAssertion(deps, ctx, { ...input, userId: user.userId });
      return proof.proved ? [proof.amr] : null;
    },
  };
}
