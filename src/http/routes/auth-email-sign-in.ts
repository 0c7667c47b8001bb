import { z } from "@hono/zod-openapi";
import type { Context } from "hono";
import { browserOriginCheck, completeBrowserSignIn } from "../../auth/browser-sessions.ts";
import {
  checkEmailCode,
  checkEmailLink,
  sendEmailSignIn,
  signInWithEmailLink,
  verifyEmailCode,
} from "../../auth/email-sign-in.ts";
import type { SignIn } from "../../auth/sessions.ts";
import { AppError } from "../../errors.ts";
import { defineArea } from "../area.ts";
import { apiRoute, json, jsonBody, problem } from "../openapi.ts";
import { type AppEnv, anonymousCtxOf, createRouter } from "../request-context.ts";
import { setSessionCookie } from "../session-cookie.ts";
import { type AuthRouteDeps, signInResult, signInTenant } from "./auth.ts";
import { browserSignInResult, tenantCodeField } from "./auth-schemas.ts";

const emailSignInCode = z
  .object({ email: z.string().min(1).max(320), code: z.string().min(1).max(16), tenant: tenantCodeField })
  .openapi("EmailSignInCode");
const emailSignInLink = z
  .object({
    token: z.string().min(16).max(256).openapi({ description: "The `token` of the link in the message." }),
  })
  .openapi("EmailSignInLink");

const routes = {
  start: apiRoute("public", {
    method: "post",
    path: "/api/auth/email/code",
    operationId: "sendEmailSignInCode",
    tags: ["auth"],
    summary: "Mail a sign-in code and link (202 whether or not the address has an account).",
    description:
      "Answers 202 once the send windows (per address and tenant, per client) allow it, before anything " +
      "is looked up: when the tenant allows e-mail sign-in (`emailSignIn`, GET /api/tenant/settings) and " +
      "an Active member has the address, a six-digit code and a link are mailed in the background. The " +
      "answer and its timing are the same for every address, tenant code and setting. The code and the " +
      "link work once, within `Authentication:EmailSignIn:CodeLifetimeSeconds`; using one spends the other.",
    request: {
      body: jsonBody(
        z
          .object({ email: z.string().min(1).max(320), tenant: tenantCodeField })
          .openapi("EmailSignInRequest"),
      ),
    },
    responses: { 202: { description: "Accepted." }, 429: problem("Too many sign-in messages.") },
  }),
  verify: apiRoute("public", {
    method: "post",
    path: "/api/auth/email/code/verify",
    operationId: "verifyEmailSignInCode",
    tags: ["auth"],
    summary: "Sign in with the code of a sign-in message.",
    request: {
      body: jsonBody(emailSignInCode),
    },
    responses: {
      200: json("Signed in, or the second-factor step.", signInResult),
      401: problem("Wrong, expired or used code (the same answer for an unknown address)."),
      403: problem(
        "`forbidden`: the tenant enforces single sign-on for this address's domain (docs/sso.md).",
      ),
      429: problem("Too many attempts."),
    },
  }),
  link: apiRoute("public", {
    method: "post",
    path: "/api/auth/email/link",
    operationId: "signInWithEmailLink",
    tags: ["auth"],
    summary: "Sign in with the token of a sign-in message's link.",
    request: {
      body: jsonBody(emailSignInLink),
    },
    responses: {
      200: json("Signed in, or the second-factor step.", signInResult),
      404: problem("The link is unknown, used or expired (the same answer for each)."),
      403: problem(
        "`forbidden`: the tenant enforces single sign-on for this address's domain (docs/sso.md).",
      ),
    },
  }),
  browserVerify: apiRoute(
    "public",
    {
      method: "post",
      path: "/api/auth/browser/email/code/verify",
      operationId: "browserVerifyEmailSignInCode",
      tags: ["auth"],
      summary:
        "Browser sign-in with the code of a sign-in message: sets the session cookie (or the second-factor step).",
      description:
        "As POST /api/auth/email/code/verify, from an `Origin` in BrowserAuth:AllowedOrigins only.",
      request: { body: jsonBody(emailSignInCode) },
      responses: {
        200: json(
          "Signed in (send csrfToken back as X-CSRF-Token), or the second-factor step.",
          browserSignInResult,
        ),
        401: problem("Wrong, expired or used code (the same answer for an unknown address)."),
        403: problem("Origin not allowed."),
        429: problem("Too many attempts."),
      },
    },
    { cookies: true },
  ),
  browserLink: apiRoute(
    "public",
    {
      method: "post",
      path: "/api/auth/browser/email/link",
      operationId: "browserSignInWithEmailLink",
      tags: ["auth"],
      summary:
        "Browser sign-in with the token of a sign-in message's link: sets the session cookie (or the second-factor step).",
      description: "As POST /api/auth/email/link, from an `Origin` in BrowserAuth:AllowedOrigins only.",
      request: { body: jsonBody(emailSignInLink) },
      responses: {
        200: json(
          "Signed in (send csrfToken back as X-CSRF-Token), or the second-factor step.",
          browserSignInResult,
        ),
        403: problem("Origin not allowed."),
        404: problem("The link is unknown, used or expired (the same answer for each)."),
      },
    },
    { cookies: true },
  ),
};

/** Sign-in by a code or link mailed to the address, where the tenant allows it (src/auth/email-sign-in.ts). */
export function emailSignInRoutes(deps: AuthRouteDeps) {
  const originAllowed = browserOriginCheck(deps.config);
  /** A verified sign-in as a browser session: only from an allowed origin, checked before the credential. */
  const asBrowser = async (c: Context<AppEnv>, check: () => Promise<SignIn>) => {
    const origin = c.req.header("origin");
    if (!origin || !originAllowed(origin))
      throw new AppError("forbidden", "This origin may not use browser authentication.");
    const signedIn = await completeBrowserSignIn(deps, await check());
    c.header("cache-control", "no-store");
    if ("mfaRequired" in signedIn) return signedIn;
    const { cookie, ...session } = signedIn;
    setSessionCookie(c, deps.config, cookie, session.expiresIn);
    return session;
  };
  return createRouter()
    .openapi(routes.start, async (c) => {
      const { tenant, email } = c.req.valid("json");
      // an unknown tenant code gets the same answer as an unknown address
      await sendEmailSignIn(deps, anonymousCtxOf(c, await signInTenant(deps, c, tenant)), { email });
      return c.body(null, 202);
    })
    .openapi(routes.verify, async (c) => {
      const { tenant, ...input } = c.req.valid("json");
      const ctx = anonymousCtxOf(c, await signInTenant(deps, c, tenant));
      const pair = await verifyEmailCode(deps, ctx, input);
      c.header("cache-control", "no-store");
      return c.json(pair, 200);
    })
    .openapi(routes.link, async (c) => {
      const pair = await signInWithEmailLink(
        deps,
        anonymousCtxOf(c, c.get("tenant")?.id ?? null),
        c.req.valid("json"),
      );
      c.header("cache-control", "no-store");
      return c.json(pair, 200);
    })
    .openapi(routes.browserVerify, async (c) => {
      const { tenant, ...input } = c.req.valid("json");
      return c.json(
        await asBrowser(c, async () =>
          checkEmailCode(deps, anonymousCtxOf(c, await signInTenant(deps, c, tenant)), input),
        ),
        200,
      );
    })
    .openapi(routes.browserLink, async (c) =>
      c.json(
        await asBrowser(c, () =>
          checkEmailLink(deps, anonymousCtxOf(c, c.get("tenant")?.id ?? null), c.req.valid("json")),
        ),
        200,
      ),
    );
}

/** The area (src/http/area.ts): listed in src/http/areas.ts, which `bun run areas:generate` writes. */
export const emailSignInArea = defineArea({ name: "auth-email-sign-in", routes: [emailSignInRoutes] });
