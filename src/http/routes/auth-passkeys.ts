import { z } from "@hono/zod-openapi";
import type { AuthenticationResponseJSON, RegistrationResponseJSON } from "@simplewebauthn/server";
import type { Context, MiddlewareHandler } from "hono";
import { completeSignIn } from "../../auth/complete-sign-in.ts";
import { peekMfaStep } from "../../auth/mfa-step.ts";
import { finishPasskeySignIn, startPasskeySignIn } from "../../auth/passkey-sign-in.ts";
import {
  finishPasskeyRegistration,
  listPasskeys,
  type PasskeyView,
  removePasskey,
  renamePasskey,
  startPasskeyRegistration,
} from "../../auth/passkeys.ts";
import { callerOf } from "../../auth/sessions.ts";
import { AppError } from "../../errors.ts";
import { defineArea } from "../area.ts";
import { EVERYONE } from "../console/layout.ts";
import { passkeyPages } from "../console/pages-passkeys.ts";
import { accessOf, apiRoute, json, jsonBody, pageQuery, problem, routerPath } from "../openapi.ts";
import { type AppEnv, anonymousCtxOf, createRouter, ctxOf } from "../request-context.ts";
import { type AuthRouteDeps, signInResult, signInTenant } from "./auth.ts";
import { PASSKEYS_ACTIONS } from "./auth-passkeys-actions.ts";
import { tenantCodeField } from "./auth-schemas.ts";
import { authenticationResponse, registrationResponse } from "./webauthn-schemas.ts";

const passkeyName = z.string().trim().min(1).max(64).openapi({ example: "Work laptop" });

const ceremonyOptions = (name: string, description: string) =>
  z
    .object({ challenge: z.string(), rpId: z.string().optional(), timeout: z.number().int().optional() })
    .loose()
    .openapi(name, { description });

const passkey = z
  .object({
    id: z.uuid(),
    name: z.string(),
    rpId: z.string().openapi({ description: "The host (relying-party id) the passkey works on." }),
    backupEligible: z
      .boolean()
      .openapi({ description: "A synced passkey (its `amr` is `swk`; else `hwk`)." }),
    backedUp: z.boolean(),
    createdAt: z.string(),
    lastUsedAt: z.string().nullable(),
  })
  .openapi("Passkey");
const passkeyIdParam = z.object({ id: z.uuid() });

const routes = {
  registerOptions: apiRoute(
    "signedIn",
    {
      method: "post",
      path: "/api/auth/passkeys/register/options",
      operationId: "startPasskeyRegistration",
      tags: ["auth"],
      summary: "Options for navigator.credentials.create(): a discoverable credential on this host.",
      description:
        "The relying-party id is the host of the request (the platform host or the tenant's custom domain); " +
        "the challenge is single use and expires after `Authentication:Passkeys:ChallengeSeconds`.",
      responses: {
        200: json(
          "PublicKeyCredentialCreationOptionsJSON.",
          ceremonyOptions("PasskeyRegistrationOptions", "WebAuthn `PublicKeyCredentialCreationOptionsJSON`."),
        ),
      },
    },
    { cookies: true },
  ),
  registerVerify: apiRoute(
    "signedIn",
    {
      method: "post",
      path: "/api/auth/passkeys/register/verify",
      operationId: "finishPasskeyRegistration",
      tags: ["auth"],
      summary: "Store the passkey navigator.credentials.create() made, under a name.",
      request: {
        body: jsonBody(
          z.object({ name: passkeyName, response: registrationResponse }).openapi("PasskeyRegistration"),
        ),
      },
      responses: {
        201: json("Registered.", passkey),
        400: problem(
          "The answer does not verify against its ceremony (origin, relying party, signature, user verification).",
        ),
        404: problem("No registration ceremony of the caller's on this host holds the answer's challenge."),
        409: problem("`conflict`: registered already, or the user holds the most passkeys allowed."),
      },
    },
    { cookies: true },
  ),
  loginOptions: apiRoute("public", {
    method: "post",
    path: "/api/auth/passkeys/login/options",
    operationId: "startPasskeySignIn",
    tags: ["auth"],
    summary:
      "Options for navigator.credentials.get(): a usernameless sign-in on this host, or a sign-in step.",
    description:
      "Without `mfaToken`: no credential listed (the authenticator offers its discoverable passkeys; conditional UI). " +
      "With the `mfaToken` of a sign-in that answered `mfaRequired` with `passkey` among its methods: that user's " +
      "passkeys on this host; answer with POST /api/auth/mfa/verify `{ mfaToken, passkey }`.",
    request: {
      body: jsonBody(
        z
          .object({
            tenant: tenantCodeField,
            mfaToken: z
              .string()
              .min(1)
              .max(128)
              .optional()
              .openapi({ description: "A sign-in step's token." }),
          })
          .openapi("PasskeySignInStart"),
      ),
    },
    responses: {
      200: json(
        "PublicKeyCredentialRequestOptionsJSON (no credentials listed: the authenticator offers its own).",
        ceremonyOptions("PasskeySignInOptions", "WebAuthn `PublicKeyCredentialRequestOptionsJSON`."),
      ),
      401: problem("The `mfaToken` is unknown, used or expired: sign in again."),
    },
  }),
  loginVerify: apiRoute("public", {
    method: "post",
    path: "/api/auth/passkeys/login/verify",
    operationId: "finishPasskeySignIn",
    tags: ["auth"],
    summary: "Sign in with a passkey alone: the assertion navigator.credentials.get() made.",
    request: {
      body: jsonBody(
        z.object({ response: authenticationResponse, tenant: tenantCodeField }).openapi("PasskeySignIn"),
      ),
    },
    responses: {
      200: json(
        "Signed in: the token pair. The passkey is a second factor, so no step follows today; the answer is the " +
          "sign-in's common one (`SignInResult`) because every sign-in ends in the same policies.",
        signInResult,
      ),
      403: problem(
        "`forbidden`: the tenant enforces single sign-on for this address's domain (docs/sso.md).",
      ),
      401: problem(
        "Not verified: unknown passkey, used or expired challenge, another host, counter regression.",
      ),
    },
  }),
  stepUpOptions: apiRoute(
    "signedIn",
    {
      method: "post",
      path: "/api/auth/passkeys/step-up/options",
      operationId: "startPasskeyStepUp",
      tags: ["auth"],
      summary: "Options for navigator.credentials.get() to step up with one of the caller's passkeys.",
      description: "Answer with POST /api/auth/mfa/step-up `{ passkey }` (RFC 9470 step-up).",
      responses: {
        200: json(
          "PublicKeyCredentialRequestOptionsJSON listing the caller's passkeys on this host.",
          ceremonyOptions("PasskeyStepUpOptions", "WebAuthn `PublicKeyCredentialRequestOptionsJSON`."),
        ),
      },
    },
    { cookies: true },
  ),
  list: apiRoute(
    "signedIn",
    {
      method: "get",
      path: "/api/auth/passkeys",
      operationId: "listMyPasskeys",
      tags: ["auth"],
      summary: "The caller's passkeys in this tenant, oldest first, a page at a time.",
      request: { query: z.object(pageQuery) },
      responses: {
        200: json(
          "A page of passkeys; pass `nextCursor` as `cursor` for the next one (null on the last page).",
          z.object({ items: z.array(passkey), nextCursor: z.string().nullable() }).openapi("PasskeyList"),
        ),
        400: problem("The limit or the cursor is not valid."),
      },
    },
    { cookies: true },
  ),
  rename: apiRoute(
    "signedIn",
    {
      method: "patch",
      path: "/api/auth/passkeys/{id}",
      operationId: "renameMyPasskey",
      tags: ["auth"],
      summary: "Rename one of the caller's passkeys.",
      request: {
        params: passkeyIdParam,
        body: jsonBody(z.object({ name: passkeyName }).openapi("PasskeyRename")),
      },
      responses: { 200: json("Renamed.", passkey), 404: problem("No passkey of the caller has this id.") },
    },
    { cookies: true },
  ),
  remove: apiRoute(
    "signedIn",
    {
      method: "delete",
      path: "/api/auth/passkeys/{id}",
      operationId: "removeMyPasskey",
      tags: ["auth"],
      summary: "Remove one of the caller's passkeys.",
      request: { params: passkeyIdParam },
      responses: { 204: { description: "Removed." }, 404: problem("No passkey of the caller has this id.") },
    },
    { cookies: true },
  ),
};

/** The relying-party id of a request: its host, as the tenancy middleware resolved it. */
export function rpIdOf(c: Context<AppEnv>): string {
  const host = c.get("host");
  if (!host) throw new AppError("host_not_allowed", "The request has no usable Host.");
  return host;
}

export const passkeyJson = (p: PasskeyView) => ({
  ...p,
  createdAt: p.createdAt.toISOString(),
  lastUsedAt: p.lastUsedAt?.toISOString() ?? null,
});

/** Passkeys (docs/auth.md, "Passkeys"): register, sign in with one alone, list, rename, remove. */
export function authPasskeyRoutes(deps: AuthRouteDeps, authenticated: MiddlewareHandler<AppEnv>) {
  const router = createRouter();
  for (const route of Object.values(routes))
    if (accessOf(route) === "signedIn") router.use(routerPath(route), authenticated);
  return router
    .openapi(routes.registerOptions, async (c) => {
      c.header("cache-control", "no-store");
      return c.json(await startPasskeyRegistration(deps, ctxOf(c), { rpId: rpIdOf(c) }), 200);
    })
    .openapi(routes.registerVerify, async (c) => {
      const { name, response } = c.req.valid("json");
      const created = await finishPasskeyRegistration(deps, ctxOf(c), {
        rpId: rpIdOf(c),
        name,
        // validated above; the library reads the rest of the structure itself
        response: response as RegistrationResponseJSON,
      });
      return c.json(passkeyJson(created), 201);
    })
    .openapi(routes.loginOptions, async (c) => {
      const { tenant, mfaToken } = c.req.valid("json");
      const ctx = anonymousCtxOf(c, await signInTenant(deps, c, tenant));
      c.header("cache-control", "no-store");
      if (mfaToken === undefined)
        return c.json(await startPasskeySignIn(deps, ctx, { rpId: rpIdOf(c) }), 200);
      // the step's own tenant and user (unknown on another tenant's host: 401)
      const step = await peekMfaStep(deps, ctx, mfaToken);
      if (!step.methods.includes("passkey"))
        throw new AppError("unauthorized", "This sign-in has no passkey.");
      const options = await startPasskeySignIn(
        deps,
        { ...ctx, tenantId: step.tenantId },
        { rpId: rpIdOf(c), userId: step.userId },
      );
      return c.json(options, 200);
    })
    .openapi(routes.stepUpOptions, async (c) => {
      const ctx = ctxOf(c);
      const { userId } = callerOf(ctx);
      c.header("cache-control", "no-store");
      return c.json(await startPasskeySignIn(deps, ctx, { rpId: rpIdOf(c), userId }), 200);
    })
    .openapi(routes.loginVerify, async (c) => {
      const { tenant, response } = c.req.valid("json");
      const ctx = anonymousCtxOf(c, await signInTenant(deps, c, tenant));
      const signIn = await finishPasskeySignIn(deps, ctx, {
        rpId: rpIdOf(c),
        response: response as AuthenticationResponseJSON,
      });
      c.header("cache-control", "no-store");
      return c.json(await completeSignIn(deps, signIn), 200);
    })
    .openapi(routes.list, async (c) => {
      const page = await listPasskeys(deps, ctxOf(c), c.req.valid("query"));
      return c.json({ items: page.items.map(passkeyJson), nextCursor: page.nextCursor }, 200);
    })
    .openapi(routes.rename, async (c) => {
      const renamed = await renamePasskey(deps, ctxOf(c), {
        ...c.req.valid("param"),
        ...c.req.valid("json"),
      });
      return c.json(passkeyJson(renamed), 200);
    })
    .openapi(routes.remove, async (c) => {
      await removePasskey(deps, ctxOf(c), c.req.valid("param"));
      return c.body(null, 204);
    });
}

/** The area (src/http/area.ts): listed in src/http/areas.ts, which `bun run areas:generate` writes. */
export const passkeysArea = defineArea({
  name: "auth-passkeys",
  routes: [authPasskeyRoutes],
  auditActions: PASSKEYS_ACTIONS,
  consolePages: [{ path: "/console/passkeys", title: "Passkeys", seenBy: EVERYONE, routes: passkeyPages }],
});
