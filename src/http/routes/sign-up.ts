import { z } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { completeSignUp, requestSignUp, signUpSchema } from "../../identity/sign-up.ts";
import { defineArea } from "../area.ts";
import { apiRoute, json, jsonBody, problem } from "../openapi.ts";
import { anonymousCtxOf, createRouter } from "../request-context.ts";
import { tokenPair } from "./auth.ts";
import { SIGN_UP_ACTIONS } from "./sign-up-actions.ts";

const signUp = apiRoute("public", {
  method: "post",
  path: "/api/auth/signup",
  operationId: "signUp",
  tags: ["auth"],
  summary: "Self-serve sign-up: a verification link is mailed; the tenant exists once it is followed.",
  description:
    "Only with `Tenancy:SignUp:Enabled` (404 otherwise). Answers 202 whatever the address and the " +
    "code (an existing account, a code taken: nothing is looked up); limited per client address and " +
    "per address domain (429). The tenant and its owner are made by POST /api/auth/signup/verify.",
  request: {
    body: jsonBody(
      z
        .object({
          email: z.email().max(320),
          name: z.string().min(1).max(200),
          password: signUpSchema.shape.password,
          tenantCode: z
            .string()
            .regex(/^[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?$/)
            .openapi({
              description: "The new tenant's code: letters, digits and inner hyphens, at most 63.",
            }),
          tenantName: z.string().min(1).max(200),
        })
        .openapi("SignUp"),
    ),
  },
  responses: {
    202: { description: "Accepted: a link is on its way if the address can receive one." },
    400: problem("A field is not valid, or the password is too weak."),
    404: problem("Sign-up is not enabled."),
    429: problem("Too many sign-ups from this client or for this address domain."),
  },
});
const verify = apiRoute("public", {
  method: "post",
  path: "/api/auth/signup/verify",
  operationId: "completeSignUp",
  tags: ["auth"],
  summary: "Follow a sign-up link: the tenant is created with the address as its owner; a token pair there.",
  request: {
    body: jsonBody(z.object({ token: z.string().min(1).max(512) }).openapi("SignUpVerification")),
  },
  responses: {
    200: json("The tenant exists; signed in as its owner.", tokenPair),
    404: problem("The link is unknown, used or expired; or sign-up is not enabled."),
    409: problem("The tenant code was taken meanwhile: sign up again with another."),
  },
});

/** Self-serve sign-up (docs/auth.md, "Sign-up"). */
export function signUpRoutes(deps: Deps) {
  return createRouter()
    .openapi(signUp, async (c) => {
      await requestSignUp(deps, anonymousCtxOf(c), c.req.valid("json"));
      return c.body(null, 202);
    })
    .openapi(verify, async (c) => {
      c.header("cache-control", "no-store");
      return c.json(await completeSignUp(deps, anonymousCtxOf(c), c.req.valid("json")), 200);
    });
}

/** The area (src/http/area.ts): listed in src/http/areas.ts, which `bun run areas:generate` writes. */
export const signUpArea = defineArea({
  name: "sign-up",
  routes: [signUpRoutes],
  auditActions: SIGN_UP_ACTIONS,
});
