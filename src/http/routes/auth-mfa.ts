import { z } from "@hono/zod-openapi";
import type { AuthenticationResponseJSON } from "@simplewebauthn/server";
import type { MiddlewareHandler } from "hono";
import { browserOriginCheck } from "../../auth/browser-sessions.ts";
import type { AuthDeps } from "../../auth/deps.ts";
import { disableTotp, enrolTotp, getMfaStatus, regenerateBackupCodes } from "../../auth/mfa-settings.ts";
import { finishMfaSignIn, startStepEnrolment, verifyMfaSignIn } from "../../auth/mfa-sign-in.ts";
import { passkeyCheck } from "../../auth/passkey-sign-in.ts";
import { stepUpSession, stepUpWithCode } from "../../auth/step-up.ts";
import { confirmTotp } from "../../auth/totp-factor.ts";
import { listTrustedDevices, revokeTrustedDevice } from "../../auth/trusted-devices.ts";
import { isoOrNull, isoText } from "../../clock.ts";
import { defineArea } from "../area.ts";
import { EVERYONE } from "../console/layout.ts";
import { mfaPages } from "../console/pages-mfa.ts";
import { accessOf, apiRoute, json, jsonBody, pageQuery, problem, routerPath } from "../openapi.ts";
import { type AppEnv, anonymousCtxOf, createRouter, ctxOf } from "../request-context.ts";
import { setSessionCookie, setTrustedDeviceCookie } from "../session-cookie.ts";
import { browserSession, tokenPair } from "./auth.ts";
import { AUTH_MFA_ACTIONS } from "./auth-mfa-actions.ts";
import { rpIdOf } from "./auth-passkeys.ts";
import { authenticationResponse } from "./webauthn-schemas.ts";

const code = z
  .string()
  .min(1)
  .max(16)
  .openapi({ description: "The authenticator's current six-digit code." });
const backupCode = z.string().min(1).max(32).openapi({ description: "One of the user's backup codes." });
const mfaToken = z.string().min(1).max(128).openapi({ description: "The step token of the sign-in." });
const trustDevice = z
  .boolean()
  .optional()
  .openapi({
    description:
      "Trust this browser: a sealed `__Host-plinth_trusted_device` cookie (Authentication:Mfa:TrustedDeviceDays) " +
      "lets later sign-ins of this user in this tenant skip the step, where the tenant allows trusted devices " +
      "(`allowTrustedDevices`; otherwise ignored). Its access tokens carry the first factor's `amr` only.",
  });
/** A second factor: a TOTP code, one of the backup codes, or a passkey's assertion (exactly one of them). */
const factorProof = z.union([
  z.object({ code }).strict().openapi("TotpCodeProof"),
  z.object({ backupCode }).strict().openapi("BackupCodeProof"),
  z.object({ passkey: authenticationResponse }).strict().openapi("PasskeyProof", {
    description: "A passkey's assertion for the options of POST /api/auth/passkeys/step-up/options.",
  }),
]);
const totpEnrolment = z.object({ uri: z.string(), qrSvg: z.string() }).openapi("TotpEnrolment");
const backupCodes = z
  .object({
    backupCodes: z.array(z.string()).openapi({
      description: "Ten single-use backup codes, shown this once (only their hashes are kept).",
    }),
  })
  .openapi("BackupCodes");

/** What an enrolment step's completion adds: the new factor's backup codes, shown this once. */
const enrolled = {
  backupCodes: z.array(z.string()).optional().openapi({
    description: "Set when the step was an enrolment: ten backup codes, shown this once.",
  }),
};

const trustedDevice = z
  .object({
    id: z.uuid(),
    client: z.string().nullable().openapi({ description: "The `User-Agent` that trusted it." }),
    address: z.string().nullable().openapi({ description: "The client address that trusted it." }),
    createdAt: z.string(),
    lastUsedAt: z
      .string()
      .nullable()
      .openapi({ description: "The last sign-in that skipped the step with it." }),
    expiresAt: z.string(),
  })
  .openapi("TrustedDevice");

const routes = {
  enrolment: apiRoute("public", {
    method: "post",
    path: "/api/auth/mfa/enrolment",
    operationId: "startMfaEnrolment",
    tags: ["auth"],
    summary: "Enrol TOTP during a sign-in step that requires enrolment (`enrolmentRequired`).",
    description:
      "Answers the otpauth:// URI and its QR code (SVG) for the step's user; the step stays open: " +
      "POST /api/auth/mfa/verify with the first code confirms the factor and completes the sign-in.",
    request: { body: jsonBody(z.object({ mfaToken }).openapi("MfaEnrolmentRequest")) },
    responses: {
      200: json("Scan it, then verify the step with a code.", totpEnrolment),
      401: problem("Unknown, used or expired step."),
      409: problem("The user has a second factor already: verify the step with it."),
    },
  }),
  verify: apiRoute(
    "public",
    {
      method: "post",
      path: "/api/auth/mfa/verify",
      operationId: "verifyMfaSignIn",
      tags: ["auth"],
      summary: "Complete a sign-in that answered `mfaRequired` with a second factor.",
      description:
        "The `mfaToken` works once, for `Authentication:Mfa:StepTokenSeconds`; a wrong code leaves it usable " +
        "(the attempts count in the second-factor windows). A step begun at the browser sign-in sets the " +
        "session cookie (only from BrowserAuth:AllowedOrigins) and answers the CSRF token.",
      request: {
        body: jsonBody(
          z
            .union([
              z.object({ mfaToken, code, trustDevice }).strict().openapi("MfaCodeVerification"),
              z.object({ mfaToken, backupCode, trustDevice }).strict().openapi("MfaBackupCodeVerification"),
              z
                .object({ mfaToken, passkey: authenticationResponse, trustDevice })
                .strict()
                .openapi("MfaPasskeyVerification", {
                  description:
                    "A passkey's assertion for the options of POST /api/auth/passkeys/login/options with this mfaToken.",
                }),
            ])
            .openapi("MfaVerification"),
        ),
      },
      responses: {
        200: json(
          "Signed in: the token pair, or (browser) the session.",
          z.union([tokenPair.extend(enrolled), browserSession.extend(enrolled)]).openapi("MfaSignIn"),
        ),
        401: problem("Unknown, used or expired step, or a wrong code."),
        403: problem("A browser sign-in's step completed from an origin not allowed."),
        429: problem("Too many attempts."),
      },
    },
    { cookies: true },
  ),
  status: apiRoute("signedIn", {
    method: "get",
    path: "/api/auth/mfa",
    operationId: "getMySecondFactors",
    tags: ["auth"],
    summary: "The caller's second factors.",
    responses: {
      200: json(
        "The methods a sign-in step offers, TOTP's state and the unused backup codes.",
        z
          .object({
            methods: z.array(z.string()),
            totp: z.enum(["none", "pending", "enrolled"]),
            backupCodesLeft: z.number().int(),
          })
          .openapi("SecondFactors"),
      ),
    },
  }),
  enrolTotp: apiRoute("signedIn", {
    method: "post",
    path: "/api/auth/mfa/totp",
    operationId: "enrolTotp",
    tags: ["auth"],
    summary: "Start a TOTP enrolment: the otpauth:// URI and its QR code (SVG), shown this once.",
    responses: {
      200: json("Scan it, then confirm with a first code.", totpEnrolment),
      401: problem("A recent second factor is required (step-up)."),
      409: problem("A TOTP authenticator is enrolled already."),
    },
  }),
  confirmTotp: apiRoute("signedIn", {
    method: "post",
    path: "/api/auth/mfa/totp/confirm",
    operationId: "confirmTotp",
    tags: ["auth"],
    summary: "Confirm the TOTP enrolment with a first code; answers ten backup codes, shown once.",
    request: { body: jsonBody(z.object({ code }).openapi("TotpConfirmation")) },
    responses: {
      200: json("Enrolled.", backupCodes),
      400: problem("The code does not match."),
      404: problem("No enrolment to confirm."),
      429: problem("Too many attempts."),
    },
  }),
  removeTotp: apiRoute("signedIn", {
    method: "delete",
    path: "/api/auth/mfa/totp",
    operationId: "removeTotp",
    tags: ["auth"],
    summary: "Remove the TOTP authenticator (after a fresh second factor).",
    responses: {
      204: { description: "Removed (the backup codes too when no other factor is left)." },
      401: problem("A recent second factor is required (step-up)."),
      404: problem("No TOTP authenticator is enrolled."),
    },
  }),
  backupCodes: apiRoute("signedIn", {
    method: "post",
    path: "/api/auth/mfa/backup-codes",
    operationId: "regenerateBackupCodes",
    tags: ["auth"],
    summary: "Replace the backup codes with a new set of ten (after a fresh second factor).",
    responses: {
      200: json("The new codes, shown this once; the old ones stop working.", backupCodes),
      401: problem("A recent second factor is required (step-up)."),
      409: problem("No second factor is enrolled."),
    },
  }),
  trustedDevices: apiRoute("signedIn", {
    method: "get",
    path: "/api/auth/mfa/trusted-devices",
    operationId: "listMyTrustedDevices",
    tags: ["auth"],
    summary:
      "The caller's trusted browsers in this tenant (those that skip the sign-in step), newest first, a page at a time.",
    request: { query: z.object(pageQuery) },
    responses: {
      200: json(
        "A page of unrevoked, unexpired trusted devices (none for platform staff); pass `nextCursor` as `cursor` for the next one (null on the last page).",
        z
          .object({ items: z.array(trustedDevice), nextCursor: z.string().nullable() })
          .openapi("TrustedDeviceList"),
      ),
      400: problem("The limit or the cursor is not valid."),
    },
  }),
  revokeTrustedDevice: apiRoute("signedIn", {
    method: "delete",
    path: "/api/auth/mfa/trusted-devices/{id}",
    operationId: "revokeMyTrustedDevice",
    tags: ["auth"],
    summary: "Revoke one of the caller's trusted browsers: its next sign-in takes the step again.",
    request: { params: z.object({ id: z.uuid() }) },
    responses: {
      204: { description: "Revoked." },
      404: problem("No trusted device of the caller has this id."),
    },
  }),
  stepUp: apiRoute(
    "signedIn",
    {
      method: "post",
      path: "/api/auth/mfa/step-up",
      operationId: "stepUp",
      tags: ["auth"],
      summary: "Prove a second factor again on this session (RFC 9470 step-up).",
      description:
        "Answers a 401 `insufficient_user_authentication` challenge: the session's `amr` gains the factor and " +
        "`mfa`, its `auth_time` becomes now. A token session gets a fresh access token (its refresh token " +
        "stays); a browser session answers 204.",
      request: { body: jsonBody(factorProof.openapi("StepUpProof")) },
      responses: {
        200: json(
          "Stepped up: an access token saying so.",
          z
            .object({ accessToken: z.string(), tokenType: z.literal("Bearer"), expiresIn: z.number().int() })
            .openapi("StepUpToken"),
        ),
        204: { description: "Stepped up (browser session)." },
        401: problem("Wrong code."),
        429: problem("Too many attempts."),
      },
    },
    { cookies: true },
  ),
};

/** The sign-in step and the caller's own second factors (docs/auth.md "Second factors"). */
export function authMfaRoutes(deps: AuthDeps, authenticated: MiddlewareHandler<AppEnv>) {
  const browserOriginAllowed = browserOriginCheck(deps.config);
  const router = createRouter();
  for (const route of Object.values(routes))
    if (accessOf(route) === "signedIn") router.use(routerPath(route), authenticated);
  return router
    .openapi(routes.verify, async (c) => {
      const origin = c.req.header("origin");
      const ctx = anonymousCtxOf(c, c.get("tenant")?.id ?? null);
      const body = c.req.valid("json");
      const browserAllowed = origin !== undefined && browserOriginAllowed(origin);
      const done =
        "passkey" in body
          ? await finishMfaSignIn(deps, ctx, {
              mfaToken: body.mfaToken,
              browserAllowed,
              trustDevice: body.trustDevice,
              ...passkeyCheck(deps, {
                rpId: rpIdOf(c),
                response: body.passkey as AuthenticationResponseJSON,
              }),
            })
          : await verifyMfaSignIn(deps, ctx, { ...body, browserAllowed });
      c.header("cache-control", "no-store");
      if (done.trustedDevice) setTrustedDeviceCookie(c, done.trustedDevice.value, done.trustedDevice.maxAge);
      const codes = done.backupCodes ? { backupCodes: done.backupCodes } : {};
      if (done.kind === "token") return c.json({ ...done.pair, ...codes }, 200);
      const { cookie, ...session } = done.session;
      setSessionCookie(c, deps.config, cookie, session.expiresIn);
      return c.json({ ...session, ...codes }, 200);
    })
    .openapi(routes.enrolment, async (c) => {
      c.header("cache-control", "no-store");
      return c.json(await startStepEnrolment(deps, anonymousCtxOf(c), c.req.valid("json")), 200);
    })
    .openapi(routes.status, async (c) => c.json(await getMfaStatus(deps, ctxOf(c)), 200))
    .openapi(routes.enrolTotp, async (c) => {
      c.header("cache-control", "no-store");
      return c.json(await enrolTotp(deps, ctxOf(c)), 200);
    })
    .openapi(routes.confirmTotp, async (c) => {
      c.header("cache-control", "no-store");
      return c.json(await confirmTotp(deps, ctxOf(c), c.req.valid("json")), 200);
    })
    .openapi(routes.removeTotp, async (c) => {
      await disableTotp(deps, ctxOf(c));
      return c.body(null, 204);
    })
    .openapi(routes.backupCodes, async (c) => {
      c.header("cache-control", "no-store");
      return c.json(await regenerateBackupCodes(deps, ctxOf(c)), 200);
    })
    .openapi(routes.trustedDevices, async (c) => {
      const page = await listTrustedDevices(deps, ctxOf(c), c.req.valid("query"));
      const items = page.items.map((d) => ({
        ...d,
        createdAt: isoText(d.createdAt),
        lastUsedAt: isoOrNull(d.lastUsedAt),
        expiresAt: isoText(d.expiresAt),
      }));
      return c.json({ items, nextCursor: page.nextCursor }, 200);
    })
    .openapi(routes.revokeTrustedDevice, async (c) => {
      await revokeTrustedDevice(deps, ctxOf(c), c.req.valid("param"));
      return c.body(null, 204);
    })
    .openapi(routes.stepUp, async (c) => {
      const body = c.req.valid("json");
      const token =
        "passkey" in body
          ? await stepUpSession(
              deps,
              ctxOf(c),
              passkeyCheck(deps, { rpId: rpIdOf(c), response: body.passkey as AuthenticationResponseJSON }),
            )
          : await stepUpWithCode(deps, ctxOf(c), body);
      if (!token) return c.body(null, 204);
      c.header("cache-control", "no-store");
      return c.json(token, 200);
    });
}

/** The area (src/http/area.ts): listed in src/http/areas.ts, which `bun run areas:generate` writes. */
export const authMfaArea = defineArea({
  name: "auth-mfa",
  routes: [authMfaRoutes],
  auditActions: AUTH_MFA_ACTIONS,
  consolePages: [{ path: "/console/mfa", title: "Second factors", seenBy: EVERYONE, routes: mfaPages }],
});
