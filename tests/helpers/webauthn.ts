import { createHash, createSign, generateKeyPairSync, randomBytes } from "node:crypto";
import { isoBase64URL, isoCBOR } from "@simplewebauthn/server/helpers";
import type { Db } from "../../src/db/client.ts";
import { passkeys } from "../../src/db/schema/index.ts";

/**
 * A software authenticator (ES256, WebAuthn §6.1): a P-256 key whose public half is stored as a
 * passkey row, and assertions signed with the private half as a browser would send them. For
 * integration tests of the server's paths without Chromium (tests/e2e/passkeys.test.ts has the real
 * browser's virtual authenticator).
 */
export function softAuthenticator(rpId: string) {
  const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  const jwk = publicKey.export({ format: "jwk" });
  const coordinate = (value: string | undefined) => new Uint8Array(isoBase64URL.toBuffer(value ?? ""));
  const cose = isoCBOR.encode(
    new Map<number, number | Uint8Array>([
      [1, 2],
      [3, -7],
      [-1, 1],
      [-2, coordinate(jwk.x)],
      [-3, coordinate(jwk.y)],
    ]),
  );
  const credentialId = isoBase64URL.fromBuffer(randomBytes(16));
  let counter = 0;
  return {
    credentialId,
    /** Stores the credential as `userId`'s passkey in `tenantId` (null: platform staff). */
    async register(db: Db, userId: string, tenantId: string | null) {
      await db.insert(passkeys).values({
        tenantId,
        userId,
        name: "Software key",
        rpId,
        credentialId,
        publicKey: isoBase64URL.fromBuffer(cose),
        aaguid: "00000000-0000-0000-0000-000000000000",
        backupEligible: false,
        backedUp: false,
      });
    },
    /** The answer of `navigator.credentials.get()` to `challenge` from `origin`, user verified. */
    assert(challenge: string, origin: string, userId: string) {
      counter += 1;
      const clientData = Buffer.from(JSON.stringify({ type: "webauthn.get", challenge, origin }));
      const head = Buffer.alloc(5);
      head.writeUInt8(0x05, 0); // user present and verified
      head.writeUInt32BE(counter, 1);
      const authenticatorData = Buffer.concat([createHash("sha256").update(rpId).digest(), head]);
      const signed = Buffer.concat([authenticatorData, createHash("sha256").update(clientData).digest()]);
      const signature = createSign("sha256").update(signed).sign(privateKey);
      return {
        id: credentialId,
        rawId: credentialId,
        type: "public-key" as const,
        response: {
          clientDataJSON: isoBase64URL.fromBuffer(clientData),
          authenticatorData: isoBase64URL.fromBuffer(authenticatorData),
          signature: isoBase64URL.fromBuffer(signature),
          userHandle: isoBase64URL.fromBuffer(Buffer.from(userId.replaceAll("-", ""), "hex")),
        },
        clientExtensionResults: {},
      };
    },
  };
}
