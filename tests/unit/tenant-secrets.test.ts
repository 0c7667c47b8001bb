import { describe, expect, test } from "bun:test";
import { randomBytes, randomUUID } from "node:crypto";
import {
  openSecret,
  parseTenantSecretKeys,
  type SealedSecret,
  sealSecret,
  TenantSecretError,
  type TenantSecretKeyring,
} from "../../src/security/tenant-secrets.ts";
import { newMasterKey } from "../helpers/identity.ts";

function keyring(settings: Parameters<typeof parseTenantSecretKeys>[0]): TenantSecretKeyring {
  const { keyring, problems } = parseTenantSecretKeys(settings);
  expect(problems).toEqual([]);
  if (!keyring) throw new Error("no keyring");
  return keyring;
}

function reason(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    if (error instanceof TenantSecretError) return error.reason;
    throw error;
  }
  return "opened";
}

const tenantA = randomUUID();
const tenantB = randomUUID();

describe("tenant secret crypto", () => {
  const ring = keyring({ KeyId: "k1", MasterKey: newMasterKey(), PreviousKeys: [] });

  test("round trip, with a fresh nonce every time", () => {
    const one = sealSecret(ring, tenantA, "twilio-token", "s3cr3t-välue");
    const two = sealSecret(ring, tenantA, "twilio-token", "s3cr3t-välue");
    expect(one.keyId).toBe("k1");
    expect(one.nonce).not.toBe(two.nonce);
    expect(one.ciphertext).not.toBe(two.ciphertext);
    expect(one.ciphertext).not.toContain("s3cr3t");
    expect(openSecret(ring, tenantA, "twilio-token", one)).toBe("s3cr3t-välue");
    expect(openSecret(ring, tenantA, "twilio-token", two)).toBe("s3cr3t-välue");
    expect(openSecret(ring, tenantA, "empty", sealSecret(ring, tenantA, "empty", ""))).toBe("");
  });

  test("a tampered ciphertext, tag or nonce does not decrypt", () => {
    const sealed = sealSecret(ring, tenantA, "n", "value-123");
    const flip = (b64: string, at: number) => {
      const bytes = Buffer.from(b64, "base64");
      bytes[at] = (bytes[at] ?? 0) ^ 1;
      return bytes.toString("base64");
    };
    expect(
      reason(() => openSecret(ring, tenantA, "n", { ...sealed, ciphertext: flip(sealed.ciphertext, 0) })),
    ).toBe("undecryptable");
    const last = Buffer.from(sealed.ciphertext, "base64").length - 1;
    expect(
      reason(() => openSecret(ring, tenantA, "n", { ...sealed, ciphertext: flip(sealed.ciphertext, last) })),
    ).toBe("undecryptable");
    expect(reason(() => openSecret(ring, tenantA, "n", { ...sealed, nonce: flip(sealed.nonce, 3) }))).toBe(
      "undecryptable",
    );
    expect(reason(() => openSecret(ring, tenantA, "n", { ...sealed, ciphertext: "AAAA" }))).toBe(
      "undecryptable",
    );
  });

  test("a ciphertext moved to another tenant or another name does not decrypt", () => {
    const sealed = sealSecret(ring, tenantA, "stripe-key", "sk_live_abc");
    expect(reason(() => openSecret(ring, tenantB, "stripe-key", sealed))).toBe("undecryptable");
    expect(reason(() => openSecret(ring, tenantA, "stripe-key2", sealed))).toBe("undecryptable");
    // no splicing across the tenant/name boundary either
    expect(reason(() => openSecret(ring, `${tenantA}s`, "tripe-key", sealed))).toBe("undecryptable");
  });

  test("the wrong master key under the same key id does not decrypt; an unknown key id is named", () => {
    const sealed = sealSecret(ring, tenantA, "n", "v");
    const other = keyring({ KeyId: "k1", MasterKey: newMasterKey(), PreviousKeys: [] });
    expect(reason(() => openSecret(other, tenantA, "n", sealed))).toBe("undecryptable");
    const k2only = keyring({ KeyId: "k2", MasterKey: newMasterKey(), PreviousKeys: [] });
    expect(reason(() => openSecret(k2only, tenantA, "n", sealed))).toBe("unknown_key");
    // relabelling a row with another configured key id does not help: the key id is bound too
    const both = keyring({
      KeyId: "k2",
      MasterKey: newMasterKey(),
      PreviousKeys: [{ KeyId: "k1", MasterKey: newMasterKey() }],
    });
    expect(reason(() => openSecret(both, tenantA, "n", { ...sealed, keyId: "k2" }))).toBe("undecryptable");
  });

  test("rotation: with the old key as a previous key both key ids decrypt, new values use the new key", () => {
    const oldKey = newMasterKey();
    const before = keyring({ KeyId: "2026-01", MasterKey: oldKey, PreviousKeys: [] });
    const old: SealedSecret = sealSecret(before, tenantA, "n", "old-value");
    const after = keyring({
      KeyId: "2026-06",
      MasterKey: newMasterKey(),
      PreviousKeys: [{ KeyId: "2026-01", MasterKey: oldKey }],
    });
    const fresh = sealSecret(after, tenantA, "n", "new-value");
    expect(fresh.keyId).toBe("2026-06");
    expect(openSecret(after, tenantA, "n", old)).toBe("old-value");
    expect(openSecret(after, tenantA, "n", fresh)).toBe("new-value");
    expect(reason(() => openSecret(before, tenantA, "n", fresh))).toBe("unknown_key");
  });

  test("the master key must be Base64 of exactly 32 bytes; problems name keys, never values", () => {
    const bad = [
      randomBytes(31).toString("base64"),
      randomBytes(33).toString("base64"),
      randomBytes(32).toString("hex"),
      `${randomBytes(32).toString("base64").slice(0, -1)}*`,
      "",
    ];
    for (const MasterKey of bad) {
      const { keyring, problems } = parseTenantSecretKeys({ KeyId: "k", MasterKey, PreviousKeys: [] });
      expect(keyring).toBeUndefined();
      expect(problems).toEqual([
        {
          key: "Security:TenantSecrets:MasterKey",
          problem:
            "must be Base64 of exactly 32 bytes (make one with `openssl rand -base64 32` or `bun run keys:generate`)",
        },
      ]);
      if (MasterKey) expect(JSON.stringify(problems)).not.toContain(MasterKey);
    }
    const previous = parseTenantSecretKeys({
      KeyId: "k",
      MasterKey: newMasterKey(),
      PreviousKeys: [
        { KeyId: "k", MasterKey: newMasterKey() },
        { KeyId: "old", MasterKey: "c2hvcnQ=" },
      ],
    });
    expect(previous.problems.map((p) => p.key)).toEqual([
      "Security:TenantSecrets:PreviousKeys:0:KeyId",
      "Security:TenantSecrets:PreviousKeys:1:MasterKey",
    ]);
    expect(parseTenantSecretKeys({ MasterKey: newMasterKey(), PreviousKeys: [] }).problems).toEqual([
      { key: "Security:TenantSecrets:KeyId", problem: "is required" },
    ]);
  });
});
