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
