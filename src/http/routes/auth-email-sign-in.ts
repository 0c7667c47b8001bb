import { z } from "@hono/zod-openapi";
import { sendEmailSignIn, signInWithEmailLink, verifyEmailCode } from "../../auth/email-sign-in.ts";
import { apiRoute, json, jsonBody, problem } from "../openapi.ts";
import { anonymousCtxOf, createRouter } from "../request-context.ts";
import { type AuthRouteDeps, signInResult, signInTenant } from "./auth.ts";

const tenantCode = z
  .string()
  .min(1)
  .max(64)
  .optional()
  .openapi({ description: "Tenant code (on the platform host)." });

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
        z.object({ email: z.string().min(1).max(320), tenant: tenantCode }).openapi("EmailSignInRequest"),
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
      body: jsonBody(
        z
          .object({
            email: z.string().min(1).max(320),
            code: z.string().min(1).max(16),
            tenant: tenantCode,
          })
          .openapi("EmailSignInCode"),
      ),
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
      body: jsonBody(
        z
          .object({
            token: z
              .string()
              .min(16)
              .max(256)
              .openapi({ description: "The `token` of the link in the message." }),
          })
          .openapi("EmailSignInLink"),
      ),
    },
    responses: {
      200: json("Signed in, or the second-factor step.", signInResult),
      404: problem("The link is unknown, used or expired (the same answer for each)."),
      403: problem(
        "`forbidden`: the tenant enforces single sign-on for this address's domain (docs/sso.md).",
      ),
    },
  }),
};

/** Sign-in by a code or link mailed to the address, where the tenant allows it (src/auth/email-sign-in.ts). */
export function emailSignInRoutes(deps: AuthRouteDeps) {
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
    });
}
