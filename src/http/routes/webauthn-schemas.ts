import { z } from "@hono/zod-openapi";

/**
 * The WebAuthn answers a browser sends as JSON, for the passkey routes and the console's passkey
 * sign-in (a file of their own: the console page is imported by the area that declares it).
 */

/** base64url text of a ceremony's answer, bounded (a public key, a signature, client data). */
const b64 = (max: number) =>
  z
    .string()
    .min(1)
    .max(max)
    .regex(/^[A-Za-z0-9_-]*={0,2}$/, "must be base64url");

/** What both WebAuthn answers (a new credential, an assertion) start with: the credential's id. */
const credentialIdentity = { id: b64(1024), rawId: b64(1024), type: z.literal("public-key") };

/** `PublicKeyCredential.toJSON()` of `navigator.credentials.create()` (what @simplewebauthn/browser sends). */
export const registrationResponse = z
  .object({
    ...credentialIdentity,
    response: z
      .object({
        clientDataJSON: b64(4096),
        attestationObject: b64(16384),
        transports: z.array(z.string().max(32)).max(10).optional(),
      })
      .loose(),
    clientExtensionResults: z.record(z.string(), z.unknown()),
    authenticatorAttachment: z.string().max(32).optional(),
  })
  .openapi("PasskeyRegistrationResponse", {
    description:
      "The credential `navigator.credentials.create()` answered, as JSON (WebAuthn Level 3 `toJSON()`).",
  });

/** `PublicKeyCredential.toJSON()` of `navigator.credentials.get()`. */
export const authenticationResponse = z
  .object({
    ...credentialIdentity,
    response: z
      .object({
        clientDataJSON: b64(4096),
        authenticatorData: b64(4096),
        signature: b64(8192),
        userHandle: b64(128).optional(),
      })
      .loose(),
    clientExtensionResults: z.record(z.string(), z.unknown()),
    authenticatorAttachment: z.string().max(32).optional(),
  })
  .openapi("PasskeyAuthenticationResponse", {
    description:
      "The assertion `navigator.credentials.get()` answered, as JSON (WebAuthn Level 3 `toJSON()`).",
  });
