import { eq } from "drizzle-orm";
import { recordAuditLimited } from "../../audit/record.ts";
import type { Ctx } from "../../context.ts";
import { withPlatformTransaction } from "../../db/operation.ts";
import { ssoConnections } from "../../db/schema/sso.ts";
import { AppError } from "../../errors.ts";
import { isUuid } from "../../uuid.ts";
import { takeSsoAttempt } from "../attempts.ts";
import { browserCheck } from "../browser-binding.ts";
import type { SsoCheck } from "../connection-types.ts";
import { attemptCtx, failSsoSignIn, finishSsoSignIn, type SsoOutcome } from "../finish-sign-in.ts";
import type { SsoDeps } from "../sso-deps.ts";
import { samlConnectionOf } from "./saml-connection-type.ts";
import { checkSamlResponse } from "./saml-response.ts";
import { serviceProviderOf } from "./saml-service-provider.ts";

/**
 * A POST to an ACS with no sign-in under way (no RelayState, or one unknown, spent or expired: a
 * replayed or IdP-initiated response) is refused with 400; when the path names a connection, the
 * refusal is recorded in its tenant's audit log.
 */
async function refuseUnsolicited(deps: SsoDeps, ctx: Ctx, connectionId: string): Promise<never> {
  const [row] = isUuid(connectionId)
    ? await withPlatformTransaction(deps, { ...ctx, tx: undefined }, (tx) =>
        tx
          .select({ id: ssoConnections.id, tenantId: ssoConnections.tenantId })
          .from(ssoConnections)
          .where(eq(ssoConnections.id, connectionId)),
      )
    : [];
  if (row)
    await recordAuditLimited(
      deps,
      { ...ctx, tenantId: row.tenantId },
      {
        action: "auth.sign_in",
        outcome: "failure",
        target: { type: "sso_connection", id: row.id },
        details: {
          method: "sso",
          kind: "saml",
          code: "in_response_to",
          reason: "no sign-in under way for this RelayState (replayed, expired or IdP-initiated response)",
        },
      },
    );
  throw new AppError("bad_request", "This sign-in is unknown, expired or already finished: start it again.");
}

/**
 * The ACS (`POST /api/auth/sso/saml/{connectionId}/acs`, HTTP-POST binding): takes the attempt its
 * RelayState names (once; it must be this connection's), checks the response against the
 * AuthnRequest the attempt sent (`checkSamlResponse`: signature, issuer, InResponseTo, time,
 * audience, Destination, Recipient, replay) and finishes the sign-in with the mapped e-mail, name
 * and groups, or fails it naming the check in words.
 */
export async function completeSamlSignIn(
  deps: SsoDeps,
  ctx: Ctx,
  input: {
    connectionId: string;
    samlResponse: string | undefined;
    relayState: string | undefined;
    browser: string | undefined;
  },
): Promise<SsoOutcome> {
  const taken = input.relayState
    ? await takeSsoAttempt(deps, ctx, { state: input.relayState, type: "saml" })
    : null;
  if (!taken || taken.connection.id !== input.connectionId)
    return refuseUnsolicited(deps, ctx, input.connectionId);
  const { attempt, connection } = taken;
  const tctx = attemptCtx(ctx, attempt);
  const bound = browserCheck(attempt, input.browser);
  if (!bound.ok) return failSsoSignIn(deps, tctx, { attempt, connection, checks: [bound] });
  const requestId = attempt.data.requestId;
  const checked = await checkSamlResponse(deps, tctx, {
    connection: samlConnectionOf(connection),
    sp: serviceProviderOf(deps.config.settings, connection.id),
    samlResponse: input.samlResponse ?? "",
    request: requestId ? { requestId, createdAt: attempt.createdAt } : null,
  });
  const checks: SsoCheck[] = [bound, ...checked.checks];
  if (!checked.identity) return failSsoSignIn(deps, tctx, { attempt, connection, checks });
  const { identity } = checked;
  return finishSsoSignIn(deps, tctx, {
    attempt,
    connection,
    checks,
    profile: {
      subject: identity.nameId,
      email: identity.email,
      name: identity.name ?? "",
      groups: identity.groups.slice(0, 200),
      amr: [],
    },
  });
}
