import { z } from "@hono/zod-openapi";
import type { Context } from "hono";
import { browserOriginCheck } from "../../auth/browser-sessions.ts";
import { AppError } from "../../errors.ts";
import { newBrowserBinding } from "../../sso/browser-binding.ts";
import { discoverSsoSignIn } from "../../sso/discover.ts";
import { exchangeSsoCode } from "../../sso/exchange.ts";
import type { SsoOutcome } from "../../sso/finish-sign-in.ts";
import { completeOidcSignIn } from "../../sso/oidc/oidc-callback.ts";
import type { SsoDeps } from "../../sso/sso-deps.ts";
import { defineArea } from "../area.ts";
import { apiRoute, headerRef, json, jsonBody, problem } from "../openapi.ts";
import type { AppEnv } from "../request-context.ts";
import { anonymousCtxOf, createRouter } from "../request-context.ts";
import { setSessionCookie } from "../session-cookie.ts";
import { readBindingCookie, setBindingCookie } from "../sso-binding-cookie.ts";
import { tokenPair } from "./auth.ts";
import { SSO_SIGN_IN_ACTIONS } from "./sso-sign-in-actions.ts";

export const ssoCheck = z
  .object({
    check: z.string().openapi({ example: "audience" }),
    ok: z.boolean(),
    detail: z.string().openapi({ description: "What was checked, or what is wrong, in words." }),
  })
  .openapi("SsoCheck");

export const ssoTestReport = z
  .object({
    ok: z.boolean(),
    connectionId: z.string(),
    checks: z.array(ssoCheck),
    profile: z
      .object({
        subject: z.string(),
        email: z.string(),
        name: z.string(),
        groups: z.array(z.string()),
        role: z.string().openapi({ description: "The role a member provisioned now would get." }),
      })
      .nullable(),
  })
  .openapi("SsoTestReport");

/** A test sign-in's answer at the callback: its report, or (started in the console) the page on to the console's report. */
export const testAnswer = {
  description:
    "A test sign-in's report: every check, in words (`application/json`); one started in the console: an HTML page that goes on to the console's report.",
  content: {
    "application/json": { schema: ssoTestReport },
    "text/html": { schema: z.string().openapi("SsoTestContinuePage") },
  },
};

const redirect = (description: string) => ({
  description,
  headers: { Location: headerRef("Location") },
});

const routes = {
  discover: apiRoute(
    "public",
    {
      method: "post",
      path: "/api/auth/sso/discover",
      operationId: "discoverSso",
      tags: ["auth"],
      summary:
        "Email-first sign-in: the identity provider to send the browser to, for an address of a verified domain.",
      description:
        "An address in an e-mail domain a tenant has verified, whose tenant has the `sso` feature and an active connection, starts a sign-in there: send the browser to `redirectUrl`. After the provider, Plinth redirects (303) to `returnTo` with `?code=…` (single use, 60 seconds) for `POST /api/auth/sso/exchange`, or with `?error=sso_failed` (`?error=seat_limit_reached` when the plan has no seat for a new member). Any other address is 404: an unverified domain is never routed. Call it from the browser that will sign in (with credentials): the answer sets a short-lived cookie binding the sign-in to that browser, and the callback is refused in any other (login CSRF protection).",
      request: {
        body: jsonBody(
          z
            .object({
              email: z.string().min(3).max(320),
              returnTo: z.string().max(2048).optional().openapi({
                format: "uri",
                pattern: "^https?://[^\\s/?#@]+(?:[/?#]\\S*)?$",
                description:
                  "Where the code goes: a URL under an origin of `BrowserAuth:AllowedOrigins` or `Server:PublicBaseUrl`; default `<PublicBaseUrl>/auth/sso/complete`.",
              }),
            })
            .openapi("SsoDiscovery"),
        ),
      },
      responses: {
        200: json("Send the browser here.", z.object({ redirectUrl: z.string() }).openapi("SsoRedirect")),
        403: problem(
          "`returnTo` is under an origin not in `BrowserAuth:AllowedOrigins` (nor `Server:PublicBaseUrl`).",
        ),
        404: problem("No single sign-on applies to this address."),
      },
    },
    { cookies: true },
  ),
  oidcCallback: apiRoute("public", {
    method: "get",
    path: "/api/auth/sso/oidc/callback",
    operationId: "ssoOidcCallback",
    tags: ["auth"],
    summary: "The OIDC redirect URI: finishes a sign-in at the provider.",
    request: {
      query: z.object({
        state: z.string().max(512).optional(),
        code: z.string().max(4096).optional(),
        error: z.string().max(256).optional(),
        error_description: z.string().max(2048).optional(),
        iss: z.string().max(2048).optional(),
      }),
    },
    responses: {
      200: testAnswer,
      303: redirect(
        "To `returnTo` with `?code=…`, or `?error=sso_failed` (the reason is in the audit log), or `?error=seat_limit_reached`.",
      ),
      404: problem("Unknown, expired or finished sign-in (`state`): start it again."),
    },
  }),
  exchange: apiRoute(
    "public",
    {
      method: "post",
      path: "/api/auth/sso/exchange",
      operationId: "exchangeSsoCode",
      tags: ["auth"],
      summary:
        "Turn a finished sign-in's code into a token pair, or (from an allowed browser origin) the session cookie.",
      request: {
        body: jsonBody(z.object({ code: z.string().min(1).max(512) }).openapi("SsoCodeExchange")),
      },
      responses: {
        200: json(
          "Signed in: a token pair; from an origin of `BrowserAuth:AllowedOrigins`, the session cookie and its CSRF token.",
          z
            .union([
              tokenPair,
              z
                .object({
                  csrfToken: z.string(),
                  expiresIn: z.number().int(),
                  passwordChangeRequired: z.boolean(),
                })
                .openapi("SsoBrowserSession"),
            ])
            .openapi("SsoExchangeResult"),
        ),
        401: problem("Unknown, used or expired code."),
        403: problem("An `Origin` not in `BrowserAuth:AllowedOrigins`."),
      },
    },
    { cookies: true },
  ),
};

/** The page a console test sign-in's callback answers: it loads nothing and runs no script. */
const CONTINUE_POLICY = "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const attribute = (value: string) =>
  value.replace(/&/g, "&amp;").replace(/"/g, "&quot;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

/**
 * A callback's outcome as HTTP: the 303; a test sign-in's report; or (a test sign-in started in the
 * console) a page that goes on to the console's report by a refresh and a link. Not a 303: after a
 * cross-site IdP's redirect or POST, a redirect would reach the console without its
 * `SameSite=Strict` session cookie; a navigation from this page of Plinth's own site takes it.
 */
export function answerOutcome(c: Context<AppEnv>, outcome: SsoOutcome) {
  c.header("cache-control", "no-store");
  if (outcome.kind === "report") return c.json(outcome.report, 200);
  if (outcome.kind === "continue") {
    const to = attribute(outcome.location);
    return c.html(
      `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="0; url=${to}"><meta name="referrer" content="no-referrer"><title>Test sign-in finished</title></head><body><p>The test sign-in is finished. <a href="${to}">Read its report in the console</a>.</p></body></html>`,
      200,
      { "content-security-policy": CONTINUE_POLICY, "referrer-policy": "no-referrer" },
    );
  }
  return c.body(null, 303, { location: outcome.location });
}

/** Single sign-on: discovery, the OIDC callback and the code exchange (docs/sso.md). */
export function ssoSignInRoutes(deps: SsoDeps) {
  const browserOriginAllowed = browserOriginCheck(deps.config);
  return createRouter()
    .openapi(routes.discover, async (c) => {
      c.header("cache-control", "no-store");
      const binding = newBrowserBinding();
      const started = await discoverSsoSignIn(deps, anonymousCtxOf(c), {
        ...c.req.valid("json"),
        browserBinding: binding.hash,
      });
      setBindingCookie(c, started.type, binding);
      return c.json({ redirectUrl: started.redirectUrl }, 200);
    })
    .openapi(routes.oidcCallback, async (c) => {
      const query = new URL(c.req.url).searchParams;
      const browser = readBindingCookie(c, "oidc");
      return answerOutcome(c, await completeOidcSignIn(deps, anonymousCtxOf(c), { query, browser })) as never;
    })
    .openapi(routes.exchange, async (c) => {
      const { code } = c.req.valid("json");
      const origin = c.req.header("origin");
      c.header("cache-control", "no-store");
      if (origin === undefined)
        return c.json(await exchangeSsoCode(deps, anonymousCtxOf(c), { code, as: "token" }), 200);
      if (!browserOriginAllowed(origin))
        throw new AppError("forbidden", "This origin may not use browser authentication.");
      const { cookie, ...session } = await exchangeSsoCode(deps, anonymousCtxOf(c), { code, as: "browser" });
      setSessionCookie(c, deps.config, cookie, session.expiresIn);
      return c.json(session, 200);
    });
}

/** The area (src/http/area.ts): listed in src/http/areas.ts, which `bun run areas:generate` writes. */
export const ssoSignInArea = defineArea({
  name: "sso-sign-in",
  routes: [ssoSignInRoutes],
  auditActions: SSO_SIGN_IN_ACTIONS,
});
