import { expect, test } from "bun:test";
import { createRedactor, REDACTED } from "../../src/redact.ts";
import { fakePem } from "../helpers/production-env.ts";

test("every secret value is replaced, including ones with regex metacharacters and nested ones", () => {
  const r = createRedactor(["p@ss+(word)$", "abcd", "abcdefgh-longer", "tiny"]);
  expect(r.text("x p@ss+(word)$ y")).toBe(`x ${REDACTED} y`);
  expect(r.text("abcdefgh-longer and abcd")).toBe(`${REDACTED} and ${REDACTED}`);
  expect(r.text("no secrets here")).toBe("no secrets here");
});

test("lines of a PEM secret are secrets on their own", () => {
  const pem = fakePem("MIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nBKcwggSjAgEAAoIBAQC7");
  const r = createRedactor([pem]);
  expect(r.text("leaked MIIEvQIBADANBgkqhkiG9w0BAQEFAASC here")).not.toContain(
    "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC",
  );
});

test("credentials in URLs and bearer tokens are hidden without knowing them", () => {
  const r = createRedactor([]);
  expect(r.text("postgres://app:hunter2@db:5432/x")).toBe(`postgres://app:${REDACTED}@db:5432/x`);
  expect(r.text("Authorization: Bearer eyJhbGciOiJSUzI1NiJ9.abc.def")).toBe(
    `Authorization: Bearer ${REDACTED}`,
  );
});

test("values: secret-named fields, nested objects, arrays, cycles", () => {
  const r = createRedactor(["s3cr3t-value"]);
  const cyclic: Record<string, unknown> = { name: "loop" };
  cyclic.self = cyclic;
  const out: unknown = r.value<Record<string, unknown>>({
    password: "anything",
    apiKey: 42,
    ok: true,
    nested: { note: "has s3cr3t-value inside", list: ["s3cr3t-value", 1] },
    cyclic,
    flag: { token: false },
  });
  expect(out).toEqual({
    password: REDACTED,
    apiKey: REDACTED,
    ok: true,
    nested: { note: `has ${REDACTED} inside`, list: [REDACTED, 1] },
    cyclic: { name: "loop", self: "[Circular]" },
    flag: { token: false },
  });
});

test("tenant API keys are hidden wherever they appear, their id part left readable", () => {
  const r = createRedactor([]);
  const key = `plk_Ab3dEf6hIj9L_${"x7Y".repeat(10)}Zq`;
  for (const line of [
    `GET /api/tenant/users?key=${key}`,
    `invalid key ${key}.`,
    `{"header":"${key}"}`,
    `Authorization: Bearer ${key}`,
  ]) {
    const out = r.text(line);
    expect(out).not.toContain(key);
    expect(out).not.toContain("x7Yx7Y");
  }
  expect(r.text(`key ${key} end`)).toBe(`key plk_Ab3dEf6hIj9L_${REDACTED} end`);
  // a truncated or mangled key is still hidden
  expect(r.text("plk_Ab3dEf6hIj9L_x7Yx7")).toBe(`plk_Ab3dEf6hIj9L_${REDACTED}`);
  expect(r.text("plk_Ab3d-Ef6hIj9L-x7Yx7")).toBe(`plk_${REDACTED}`);
  // a key's prefix (`plk_` and the id part) stays readable, in text and in audit details
  expect(r.text("prefix plk_Ab3dEf6hIj9L end")).toBe("prefix plk_Ab3dEf6hIj9L end");
  expect(r.value({ prefix: "plk_Ab3dEf6hIj9L" })).toEqual({ prefix: "plk_Ab3dEf6hIj9L" });
  expect(r.text("plk_Ab3dEf6hIj9LX")).toBe(`plk_${REDACTED}`);
  expect(r.text("the plk_ prefix alone")).toBe("the plk_ prefix alone");
});

test("SCIM tokens are hidden wherever they appear, their prefix left readable", () => {
  const r = createRedactor([]);
  const token = `plscim_Ab3dEf6hIj9L_${"x7Y".repeat(10)}Zq`;
  for (const line of [`invalid token ${token}.`, `{"token":"${token}"}`, `url?t=${token}`]) {
    const out = r.text(line);
    expect(out).not.toContain("x7Yx7Y");
  }
  expect(r.text(`token ${token} end`)).toBe(`token plscim_Ab3dEf6hIj9L_${REDACTED} end`);
  expect(r.text("prefix plscim_Ab3dEf6hIj9L end")).toBe("prefix plscim_Ab3dEf6hIj9L end");
});

test("a request id passes as it is, unless a configured secret could hide in its digits", () => {
  const id = "5f0c2a4e-9b1d-4c3e-8a7f-0d6e1b2c3a4f";
  expect(createRedactor(["s3cr3t-value", fakePem("MIIEvQIBADANBgkqhkiG9w0BAQEFAASC")]).text(id)).toBe(id);
  // a secret of hexadecimal digits alone (a key as hex): still found inside one
  expect(createRedactor(["9b1d-4c3e"]).text(id)).toBe(`5f0c2a4e-${REDACTED}-8a7f-0d6e1b2c3a4f`);
  expect(createRedactor(["9B1D4C3E"]).text("9B1D4C3E")).toBe(REDACTED);
});
