import { z } from "@hono/zod-openapi";
import type { MiddlewareHandler } from "hono";
import { requestPasswordReset, resetPassword, verifyEmail } from "../../auth/password-reset.ts";
import { defineArea } from "../area.ts";
import { accessOf, apiRoute, jsonBody, problem, routerPath } from "../openapi.ts";
import { type AppEnv, anonymousCtxOf, createRouter } from "../request-context.ts";
import { type AuthRouteDeps, signInTenant } from "./auth.ts";
import { AUTH_RECOVERY_ACTIONS } from "./auth-recovery-actions.ts";
import { tenantCodeField } from "./auth-schemas.ts";

/** A one-time token from a message's link (`?token=`): 43 base64url characters as Plinth makes them. */
const linkToken = z
  .string()
  .min(16)
  .max(256)
  .openapi({ description: "The `token` of the link in the message." });

const routes = {
  forgot: apiRoute("public", {
    method: "post",
    path: "/api/auth/password/forgot",
    operationId: "requestPasswordReset",
    tags: ["auth"],
    summary: "Send a password reset link (202 whether or not the address has an account).",
    description:
      "Answers 202 once the reset windows (per address asked for and per client) allow it, before the " +
      "address is looked up: the link is made and e-mailed in the background, so the answer and its " +
      "timing are the same for a known and an unknown address. The link is valid " +
      "`Authentication:PasswordReset:TokenLifetimeMinutes` and works once; a newer one replaces it.",
    request: {
      body: jsonBody(
        z
          .object({
            email: z.string().min(1).max(320),
            tenant: tenantCodeField,
          })
          .openapi("PasswordResetRequest"),
      ),
    },
    responses: { 202: { description: "Accepted." }, 429: problem("Too many reset requests.") },
  }),
  reset: apiRoute("public", {
    method: "post",
    path: "/api/auth/password/reset",
    operationId: "resetPassword",
    tags: ["auth"],
    summary: "Set a new password with a reset link's token; ends every session of the user.",
    request: {
      body: jsonBody(
        z.object({ token: linkToken, newPassword: z.string().min(1).max(1024) }).openapi("PasswordReset"),
      ),
    },
    responses: {
      204: { description: "The password is set; every session of the user has ended." },
      404: problem("The link is unknown, used or expired (the same answer for each)."),
    },
  }),
  verify: apiRoute("public", {
    method: "post",
    path: "/api/auth/email/verify",
    operationId: "verifyEmail",
    tags: ["auth"],
    summary: "Mark an address verified with the token of the link sent to it.",
    request: { body: jsonBody(z.object({ token: linkToken }).openapi("EmailVerification")) },
    responses: {
      204: { description: "The address is verified." },
      404: problem("The link is unknown, used or expired (the same answer for each)."),
    },
  }),
};

/** Password reset and e-mail verification: public routes, each answered the same for every address. */
export function authRecoveryRoutes(deps: AuthRouteDeps, authenticated: MiddlewareHandler<AppEnv>) {
  const router = createRouter();
  for (const route of Object.values(routes))
    if (accessOf(route) === "signedIn") router.use(routerPath(route), authenticated);
  return router
    .openapi(routes.forgot, async (c) => {
      const { tenant, email } = c.req.valid("json");
      await requestPasswordReset(deps, anonymousCtxOf(c, await signInTenant(deps, c, tenant)), { email });
      return c.body(null, 202);
    })
    .openapi(routes.reset, async (c) => {
      await resetPassword(deps, anonymousCtxOf(c, c.get("tenant")?.id ?? null), c.req.valid("json"));
      return c.body(null, 204);
    })
    .openapi(routes.verify, async (c) => {
      await verifyEmail(deps, anonymousCtxOf(c, c.get("tenant")?.id ?? null), c.req.valid("json"));
      return c.body(null, 204);
    });
}

/** The area (src/http/area.ts): listed in src/http/areas.ts, which `bun run areas:generate` writes. */
export const authRecoveryArea = defineArea({
  name: "auth-recovery",
  routes: [authRecoveryRoutes],
  auditActions: AUTH_RECOVERY_ACTIONS,
});
