import { describe, expect, test } from "bun:test";
import { objectKeyProblem, relativeObjectKey, tenantObjectKey } from "../../src/storage/object-keys.ts";

const tenant = "3f1c2b7e-9a4d-4e21-8f6a-0c5b1d2e3f40";

describe("tenant object keys", () => {
  test("a relative key lands under tenants/<id>/", () => {
    expect(tenantObjectKey(tenant, "avatars/me.png")).toBe(`tenants/${tenant}/avatars/me.png`);
    expect(tenantObjectKey(tenant, "a b/ü.txt")).toBe(`tenants/${tenant}/a b/ü.txt`);
    expect(tenantObjectKey(tenant, "x..y/.hidden")).toBe(`tenants/${tenant}/x..y/.hidden`);
    expect(relativeObjectKey(tenant, `tenants/${tenant}/a/b`)).toBe("a/b");
    expect(relativeObjectKey(tenant, "tenants/other/a")).toBeNull();
  });

  const refused = [
    "",
    "..",
    "../x",
    "a/../../b",
    "a/./b",
    "a//b",
    "a/",
    "/etc/passwd",
    `/tenants/${tenant}/x`,
    "a\\b",
    "..\\x",
    "a\u0000b",
    "a\nb",
    "a\rb",
    "a\u007fb",
    "%2e%2e/x",
    "%2E%2E%2Fx",
    "a/%2e%2e%2f%2e%2e/b",
    "%252e%252e%252fx",
    "a%5c..%5cb",
    "%2fetc",
    "%00",
    "%zz",
    "\uff0e\uff0e/x",
    "a/\uff0e\uff0e",
    "s3://bucket/key",
    "http://x/y",
    // the mark of an upload grant's object version is reserved
    "a.txt~g~3f1c2b7e-9a4d-4e21-8f6a-0c5b1d2e3f40",
    "a~g~",
  ];
  for (const key of refused) {
    test(`refuses ${JSON.stringify(key)}`, () => {
      expect(objectKeyProblem(key)).not.toBeNull();
      expect(() => tenantObjectKey(tenant, key)).toThrow();
    });
  }

  test("refuses keys that would exceed S3's 1024 bytes with the prefix, and malformed tenant ids", () => {
    // 45 bytes of prefix, 39 of an upload grant's mark
    expect(() => tenantObjectKey(tenant, "k".repeat(1024 - 45 - 39))).not.toThrow();
    expect(() => tenantObjectKey(tenant, "k".repeat(1024 - 44 - 39))).toThrow();
    expect(() => tenantObjectKey("../x", "a")).toThrow();
    expect(() => tenantObjectKey(tenant.toUpperCase(), "a")).toThrow();
  });
});
