import { expect } from "bun:test";
import { createHmac } from "node:crypto";
import { type Secret, URI } from "otpauth";
import type { ManualClock } from "../../src/clock.ts";
import type { TestApp } from "./app.ts";
import { bearer, json } from "./identity.ts";

/** An authenticator written here from RFC 6238 itself (node:crypto only): independent of `otpauth`. */
export function rfcCode(secret: Buffer, atMs: number, digits = 6, algorithm = "sha1"): string {
  const counter = Buffer.alloc(8);
  counter.writeBigUInt64BE(BigInt(Math.floor(atMs / 1000 / 30)));
  const mac = createHmac(algorithm, secret).update(counter).digest();
  const offset = (mac[mac.length - 1] ?? 0) & 0x0f;
  const binary = mac.readUInt32BE(offset) & 0x7fffffff;
  return String(binary % 10 ** digits).padStart(digits, "0");
}

/**
 * Enrols TOTP for the signed-in `user` through the API: the secret as an app would read it from the
 * URI, and the backup codes; the clock then moves a step on, so the next code is a new one.
 */
export async function enrolTotp(
  h: Pick<TestApp, "request">,
  clock: ManualClock,
  user: { accessToken: string },
): Promise<{ uri: string; secret: Buffer; backupCodes: string[] }> {
  const started = await h.request("/api/auth/mfa/totp", { method: "POST", ...bearer(user.accessToken) });
  expect(started.status).toBe(200);
  const { uri, qrSvg } = (await started.json()) as { uri: string; qrSvg: string };
  expect(qrSvg).toStartWith("<svg");
  expect(qrSvg).not.toContain("<script");
  const app = URI.parse(uri);
  const secret = Buffer.from((app as unknown as { secret: Secret }).secret.bytes);
  const confirmed = await h.request(
    "/api/auth/mfa/totp/confirm",
    json(
      { code: app.generate({ timestamp: clock.now().getTime() }) },
      bearer(user.accessToken).headers as Record<string, string>,
    ),
  );
  expect(confirmed.status).toBe(200);
  const { backupCodes } = (await confirmed.json()) as { backupCodes: string[] };
  clock.advance(30_000);
  return { uri, secret, backupCodes };
}
