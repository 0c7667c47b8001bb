import { expect, test } from "bun:test";
import { argon2id, argon2Verify } from "hash-wasm";
import { hashPassword, passwordProblem, verifyPassword } from "../../src/security/passwords.ts";

test("hashes are argon2id PHC strings at OWASP's parameters", async () => {
  const hash = await hashPassword("correct horse battery");
  expect(hash).toMatch(/^\$argon2id\$v=19\$m=19456,t=2,p=1\$/);
  expect(await verifyPassword("correct horse battery", hash)).toBe(true);
  expect(await verifyPassword("wrong", hash)).toBe(false);
});

test("portable: Bun's hashes verify with hash-wasm (Deno) and hash-wasm's verify with Bun", async () => {
  const fromBun = await hashPassword("portable-password-1");
  expect(await argon2Verify({ password: "portable-password-1", hash: fromBun })).toBe(true);
  const fromWasm = await argon2id({
    password: "portable-password-2",
    salt: crypto.getRandomValues(new Uint8Array(16)),
    parallelism: 1,
    iterations: 2,
    memorySize: 19_456,
    hashLength: 32,
    outputType: "encoded",
  });
  expect(await verifyPassword("portable-password-2", fromWasm)).toBe(true);
  expect(await verifyPassword("portable-password-x", fromWasm)).toBe(false);
});

test("a malformed hash never verifies and never throws", async () => {
  expect(await verifyPassword("x", "not-a-hash")).toBe(false);
});

test("a new password must be long and hard to guess, judged with the account's own words", async () => {
  const account = { email: "jane.doe@example.com", name: "Jane Doe" };
  for (const weak of [
    "short-pw",
    "password1234",
    "iloveyou1234",
    "aaaaaaaaaaaaaaaa",
    "qwertyuiop123",
    "x".repeat(300),
  ])
    expect(await passwordProblem(weak, account)).not.toBeNull();
  expect(await passwordProblem("short-pw", account)).toBe("must be at least 12 characters");
  for (const strong of ["correct-horse-battery-staple", "a-long-test-password-1", "Xk9#mQ2$vL7p-tR4"])
    expect(await passwordProblem(strong, account)).toBeNull();
  // the account's own name and e-mail are the first words an attacker tries
  expect(await passwordProblem("jane.doe@example.com", account)).not.toBeNull();
  expect(await passwordProblem("jane.doe@example.com")).toBeNull();
  // never the password itself in the message
  expect(await passwordProblem("password1234", account)).not.toContain("password1234");
});

test("a password whose letters are only the e-mail's parts or the name's is refused, whatever zxcvbn says", async () => {
  const built = "is built from the account's e-mail address or name: choose words that are not about you";
  for (const [password, account] of [
    ["adminexample1", { email: "admin@example.com", name: "Admin" }],
    ["owneracme123", { email: "owner@acme.test", name: "Olive Owner" }],
    ["Acme.Test-Owner-2026!", { email: "owner@acme.test" }],
    ["JaneDoe!20262026", { email: "ops@example.com", name: "Jane Doe" }],
    ["example2026example", { email: "x@example.com" }],
    ["plinthplinth1", {}],
  ] as const)
    expect(await passwordProblem(password, account)).toBe(built);
  // other words around them are fine, and so is a password without any of them
  expect(await passwordProblem("owner-of-a-quiet-orchard-42", { email: "owner@acme.test" })).toBeNull();
  expect(await passwordProblem("quiet-orchard-lantern-42", { email: "admin@example.com" })).toBeNull();
  // digits and symbols only: not built from the account (zxcvbn judges it)
  expect(await passwordProblem("Xk9#mQ2$vL7p-tR4", { email: "x@example.com" })).toBeNull();
});
