import { z } from "@hono/zod-openapi";

/** The shapes a sign-in answers, shared by every sign-in route (password, SMS, e-mail, passkeys, the step). */

/** The `tenant` field of a sign-in request: the tenant's code, needed on the platform host only. */
export const tenantCodeField = z
  .string()
  .min(1)
  .max(64)
  .optional()
  .openapi({ description: "Tenant code (on the platform host)." });

export const tokenPair = z
  .object({
    accessToken: z.string(),
    tokenType: z.literal("Bearer"),
    expiresIn: z.number().int(),
    refreshToken: z.string(),
    passwordChangeRequired: z.boolean(),
  })
  .openapi("TokenPair");

/** A sign-in that needs a second factor: no tokens, no cookie; `POST /api/auth/mfa/verify` completes it. */
export const mfaRequired = z
  .object({
    mfaRequired: z.literal(true),
    mfaToken: z.string().openapi({ description: "Works once, for `expiresIn` seconds." }),
    methods: z.array(z.string()).openapi({
      description: "The second factors the user can prove: `totp`, `backup_code` (and `passkey`).",
    }),
    expiresIn: z.number().int(),
    enrolmentRequired: z.literal(true).optional().openapi({
      description:
        "No second factor yet and the policy requires one: enrol with POST /api/auth/mfa/enrolment, then verify.",
    }),
  })
  .openapi("MfaRequired");

export const browserSession = z
  .object({
    csrfToken: z.string(),
    expiresIn: z.number().int(),
    passwordChangeRequired: z.boolean(),
  })
  .openapi("BrowserSession");

/** A sign-in's answer: the token pair, or the second-factor step. */
export const signInResult = z.union([tokenPair, mfaRequired]).openapi("SignInResult");

/** A browser sign-in's answer: the session (its cookie set), or the second-factor step. */
export const browserSignInResult = z.union([browserSession, mfaRequired]).openapi("BrowserSignInResult");

/** `GET /api/auth/me`: the caller, the tenant it acts in, its roles and the tenants it may switch to. */
export const me = z
  .object({
    user: z.object({ id: z.string(), email: z.string(), name: z.string() }),
    tenant: z.object({ id: z.string(), code: z.string() }).nullable(),
    roles: z.array(z.string()),
    platformRoles: z.array(z.string()),
    memberships: z
      .array(
        z
          .object({
            tenant: z.object({ id: z.string(), code: z.string(), name: z.string() }),
            role: z.string(),
          })
          .openapi("Membership"),
      )
      .openapi({
        description:
          "The tenants the caller may act in (POST /api/auth/switch), by code; none for platform staff.",
      }),
    impersonator: z.object({ id: z.string() }).nullable().openapi({
      description: "Set in an impersonated session: the platform admin acting as the user.",
    }),
  })
  .openapi("Me");
