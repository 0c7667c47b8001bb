import { and, eq, isNull } from "drizzle-orm";
import { z } from "zod";
import { recordAudit } from "../audit/record.ts";
import { announceUserChange } from "../auth/session-cache.ts";
import { clientIpOf, startTokenSession, type TokenPair } from "../auth/sessions.ts";
import { consumeSingleUseToken, issueSingleUseToken } from "../auth/single-use-tokens.ts";
import { loadIdentity, normaliseEmail } from "../auth/user-identity.ts";
import type { Ctx } from "../context.ts";
import { withPlatformTransaction } from "../db/operation.ts";
import { signUpRequests, tenantMemberships, users } from "../db/schema/index.ts";
import type { Deps } from "../deps.ts";
import { enqueueEmail } from "../email/enqueue-email.ts";
import { EMAIL_LINK_PATHS, emailLink } from "../email/links.ts";
import { AppError } from "../errors.ts";
import { emitEvent } from "../events/outbox.ts";
import { hashPassword, MIN_PASSWORD_LENGTH, passwordProblem } from "../security/passwords.ts";
import { assertAllowed } from "../security/windows.ts";
import { createTenant, TENANT_CODE } from "../tenancy/tenants.ts";

export const signUpSchema = z.object({
  email: z.email().max(320),
  name: z.string().trim().min(1).max(200),
  password: z.string().min(MIN_PASSWORD_LENGTH).max(1024),
  tenantCode: z.string().trim().toLowerCase().regex(TENANT_CODE).max(63),
  tenantName: z.string().trim().min(1).max(200),
});
export type SignUpInput = z.input<typeof signUpSchema>;

const notEnabled = () => new AppError("not_found", "Self-serve sign-up is not enabled here.");
/** A link unknown, used or expired: 404 alike, as every mailed link's (invitations, reset, verification). */
const deadLink = () => new AppError("not_found", "The link is invalid, expired or already used.");

/**
 * `POST /api/auth/signup` (`Tenancy:SignUp:Enabled`): records the request and mails a verification
 * link; nothing else exists until it is followed (`completeSignUp`). The answer is 202 whatever
 * the address and the code — whether the address has an account, whether the code is taken —
 * after the sign-up windows (per client address and per address domain; 429 past them) and the
 * password rules (400, judged on the request alone). The password is kept only hashed.
 */
export async function requestSignUp(deps: Deps, ctx: Ctx, input: SignUpInput): Promise<void> {
  const settings = deps.config.settings.Tenancy.SignUp;
  if (!settings.Enabled) throw notEnabled();
  const parsed = signUpSchema.parse(input);
  const email = normaliseEmail(parsed.email);
  const domain = email.slice(email.lastIndexOf("@") + 1);
  assertAllowed(await deps.windows.consume("signUp", { account: `domain:${domain}`, ip: clientIpOf(ctx) }));
  const weakness = await passwordProblem(parsed.password, { email, name: parsed.name });
  if (weakness)
    throw new AppError("validation_failed", "The request is not valid.", {
      fields: [{ path: "password", message: weakness }],
    });
  const passwordHash = await hashPassword(parsed.password);
  const now = deps.clock.now();
  const lifetimeSeconds = settings.TokenLifetimeMinutes * 60;
  // the named platform path: a sign-up belongs to no tenant yet (its token and e-mail are platform rows)
  await withPlatformTransaction(deps, ctx, async (tx, txCtx) => {
    const [row] = await tx
      .insert(signUpRequests)
      .values({
        email,
        name: parsed.name,
        passwordHash,
        tenantCode: parsed.tenantCode,
        tenantName: parsed.tenantName,
        createdAt: now,
        expiresAt: new Date(now.getTime() + lifetimeSeconds * 1000),
      })
      .returning({ id: signUpRequests.id });
    if (!row) throw new Error("the sign-up insert returned no row");
    const issued = await issueSingleUseToken(deps, txCtx, {
      purpose: "sign_up",
      tenantId: null,
      subject: row.id,
      lifetimeSeconds,
    });
    await enqueueEmail(deps, txCtx, {
      tenantId: null,
      to: email,
      template: "sign-up-verification",
      data: {
        name: parsed.name,
        link: emailLink(deps.config.settings, EMAIL_LINK_PATHS.signUp, issued.token),
        expiresInMinutes: settings.TokenLifetimeMinutes,
      },
    });
  });
}

/**
 * `POST /api/auth/signup/verify`: follows a sign-up link. In one transaction: the link is spent,
 * the tenant created (its code must still be free: 409 otherwise, the link left unspent), and the
 * address becomes its owner on the default plan — its shared sign-in when it has one (its password
 * stays), else a new shared identity with the password of the request, verified. Answers a token
 * pair in the new tenant. A link that is unknown, used or expired is 400 naming `token`.
 */
export async function completeSignUp(deps: Deps, ctx: Ctx, input: { token: string }): Promise<TokenPair> {
  if (!deps.config.settings.Tenancy.SignUp.Enabled) throw notEnabled();
  const now = deps.clock.now();
  // the named platform path: the link is a platform row, and the shared identity it joins or creates
  // belongs to no tenant; the new tenant's rows are written in this transaction too
  return withPlatformTransaction(deps, ctx, async (tx, txCtx) => {
    const consumed = await consumeSingleUseToken(deps, txCtx, { purpose: "sign_up", token: input.token });
    if (!consumed?.subject) throw deadLink();
    const [request] = await tx
      .update(signUpRequests)
      .set({ completedAt: now })
      .where(and(eq(signUpRequests.id, consumed.subject), isNull(signUpRequests.completedAt)))
      .returning();
    if (!request) throw deadLink();
    const tenant = await createTenant(deps, txCtx, { code: request.tenantCode, name: request.tenantName });
    await tx
      .update(signUpRequests)
      .set({ createdTenantId: tenant.id })
      .where(eq(signUpRequests.id, request.id));
    const [existing] = await tx
      .select({ id: users.id })
      .from(users)
      .where(and(eq(users.pool, "shared"), eq(users.email, request.email)));
    let userId = existing?.id;
    if (userId) {
      await tx
        .update(users)
        .set({ emailVerifiedAt: now })
        .where(and(eq(users.id, userId), isNull(users.emailVerifiedAt)));
    } else {
      const [created] = await tx
        .insert(users)
        .values({
          pool: "shared",
          email: request.email,
          name: request.name,
          passwordHash: request.passwordHash,
          passwordChangedAt: now,
          emailVerifiedAt: now,
          createdAt: now,
          updatedAt: now,
        })
        .returning({ id: users.id });
      userId = created?.id;
    }
    if (!userId) throw new Error("the sign-up user insert returned no row");
    await tx.insert(tenantMemberships).values({ tenantId: tenant.id, userId, role: "owner", createdAt: now });
    if (existing) await announceUserChange(deps.sessionCache, tx, userId);
    const ownerCtx = { ...txCtx, tenantId: tenant.id };
    await recordAudit(tx, ownerCtx, {
      action: "tenant.signed_up",
      target: { type: "tenant", id: tenant.id },
      details: { code: tenant.code, ownerId: userId, identity: existing ? "existing" : "new" },
    });
    await emitEvent(tx, deps, {
      tenantId: tenant.id,
      type: "user.created",
      data: { userId, email: request.email, role: "owner" },
    });
    const identity = await loadIdentity(tx, userId, tenant.id);
    if (identity?.status !== "Active") throw deadLink();
    return startTokenSession(deps, { identity, ctx: txCtx, method: "signup" });
  });
}
