import { expect, test } from "bun:test";
import { auditRowHash, canonicalJson, GENESIS_HASH } from "../../src/audit/chain.ts";
import { auditActorOf, auditDetails } from "../../src/audit/record.ts";

test("details keep allow-listed keys only, never a secret-named one, with secrets in text redacted", () => {
  const details = auditDetails({
    email: "a@example.com",
    password: "hunter2-hunter2",
    apiKey: "plk_abc",
    token: "t",
    whatever: "dropped",
    reason: "called with Bearer eyJhbGciOiJSUzI1NiJ9.payload.signature",
    url: "https://user:s3cret-pass@example.com/hook",
    count: 3,
    value: true,
    to: null,
    scopes: ["users:write", "domains:*"],
    name: "x".repeat(400),
  });
  expect(Object.keys(details).sort()).toEqual([
    "count",
    "email",
    "name",
    "reason",
    "scopes",
    "to",
    "url",
    "value",
  ]);
  expect(details.reason).toBe("called with Bearer [REDACTED]");
  expect(details.url).toBe("https://user:[REDACTED]@example.com/hook");
  expect(details.scopes).toEqual(["domains:*", "users:write"]);
  expect((details.name as string).length).toBe(301);
  expect(JSON.stringify(details)).not.toContain("hunter2");
  expect(JSON.stringify(details)).not.toContain("s3cret-pass");
});

test("the canonical encoding sorts keys at every depth; the hash covers every column and prev_hash", () => {
  expect(canonicalJson({ b: 1, a: { d: [2, { f: 1, e: 0 }], c: null } })).toBe(
    '{"a":{"c":null,"d":[2,{"e":0,"f":1}]},"b":1}',
  );
  const row = {
    id: 1,
    tenantId: null,
    occurredAt: new Date("2026-11-23T10:00:00.123Z"),
    actorType: "system",
    actorId: "test",
    action: "tenant.created",
    targetType: "tenant",
    targetId: "t1",
    outcome: "success",
    clientAddress: null,
    userAgent: null,
    requestId: null,
    details: { b: 1, a: 2 },
    prevHash: GENESIS_HASH,
  };
  const hash = auditRowHash(row);
  expect(hash).toMatch(/^[0-9a-f]{64}$/);
  expect(auditRowHash({ ...row, details: { a: 2, b: 1 } })).toBe(hash);
  for (const changed of [
    { id: 2 },
    { tenantId: "t" },
    { occurredAt: new Date("2026-11-23T10:00:00.124Z") },
    { actorId: "other" },
    { action: "tenant.suspended" },
    { targetId: "t2" },
    { outcome: "failure" },
    { clientAddress: "10.0.0.1" },
    { userAgent: "x" },
    { requestId: "r" },
    { details: { a: 2, b: 2 } },
    { prevHash: "f".repeat(64) },
  ])
    expect(auditRowHash({ ...row, ...changed })).not.toBe(hash);
});

test("actors: users by id, system components by name, anonymous callers without one", () => {
  expect(auditActorOf({ type: "user", userId: "u1", sessionId: "s", roles: [], platformRoles: [] })).toEqual({
    type: "user",
    id: "u1",
  });
  expect(auditActorOf({ type: "system", name: "bootstrap" })).toEqual({ type: "system", id: "bootstrap" });
  expect(auditActorOf({ type: "anonymous" })).toEqual({ type: "anonymous", id: null });
});
