import { expect, test } from "bun:test";
import { useTestApp } from "../helpers/app.ts";

// The casing rule of docs/api-conventions.md ("Enum values"), held over every enumerated value of
// the document: every `enum` and string `const` of every schema, parameter and header.

const app = useTestApp();

interface Found {
  where: string;
  values: string[];
}

/** Every enum and string const under `node`, with its JSON pointer. */
function enumsOf(node: unknown, where: string, out: Found[]): Found[] {
  if (Array.isArray(node)) for (const [i, item] of node.entries()) enumsOf(item, `${where}/${i}`, out);
  else if (node !== null && typeof node === "object") {
    const schema = node as Record<string, unknown>;
    if (Array.isArray(schema.enum))
      out.push({ where, values: schema.enum.filter((v): v is string => typeof v === "string") });
    if (typeof schema.const === "string") out.push({ where, values: [schema.const] });
    for (const [key, value] of Object.entries(schema))
      if (!["enum", "const", "example", "examples", "default"].includes(key))
        enumsOf(value, `${where}/${key.replaceAll("~", "~0").replaceAll("/", "~1")}`, out);
  }
  return out;
}

const WORD = "[a-z][a-z0-9]*(?:_[a-z0-9]+)*";
/** Lower-case words joined by `_`; namespaced by `.`; a scope's area and verb joined by `:` (`*`: all). */
const LOWER = new RegExp(`^(?:${WORD}(?:\\.${WORD})*|(?:${WORD}|\\*)(?::(?:${WORD}|\\*))?)$`);
/** The specification's state names: the status of a tenant, a user, a custom domain. */
const SPEC_STATES = new Set(["Pending", "Active", "Failed", "Disabled", "Suspended"]);
const TIME_ZONES = new Set(["UTC", ...Intl.supportedValuesOf("timeZone")]);
const MEDIA_TYPE = /^[a-z]+\/[a-z0-9.+-]+$/;
const HTTP_METHODS = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]);
/** IANA's DNS resource-record types and OAuth access-token types, as their registries spell them. */
const DNS_TYPES = new Set(["A", "AAAA", "CNAME", "TXT"]);
const TOKEN_TYPES = new Set(["Bearer"]);
/** W3C WebAuthn's credential type (PublicKeyCredentialType), as the browser sends it. */
const WEBAUTHN_TYPES = new Set(["public-key"]);

function breaksRule({ where, values }: Found): string[] {
  if (where.endsWith("/properties/status") && values.every((v) => SPEC_STATES.has(v))) return [];
  const registry = (v: string) =>
    TIME_ZONES.has(v) ||
    MEDIA_TYPE.test(v) ||
    HTTP_METHODS.has(v) ||
    DNS_TYPES.has(v) ||
    TOKEN_TYPES.has(v) ||
    WEBAUTHN_TYPES.has(v);
  if (values.every(registry)) return [];
  return values.filter((v) => !LOWER.test(v)).map((v) => `${where}: ${JSON.stringify(v)}`);
}

test("every enum value of the document follows the one casing rule", async () => {
  const doc = (await (await app.request("/api/openapi.json")).json()) as {
    paths: unknown;
    components: unknown;
  };
  const found = [...enumsOf(doc.paths, "#/paths", []), ...enumsOf(doc.components, "#/components", [])];
  expect(found.length).toBeGreaterThan(40);
  expect(found.flatMap(breaksRule)).toEqual([]);
  // the capitalised states are exactly the specification's resources: tenants, users, domains
  const capitalised = found.filter((f) => f.values.some((v) => SPEC_STATES.has(v)));
  expect(capitalised.every((f) => f.where.endsWith("/properties/status"))).toBe(true);
  // one spelling: `canceled` (subscriptions and jobs alike), never `cancelled`
  const values = found.flatMap((f) => f.values);
  expect(values).toContain("canceled");
  expect(values.filter((v) => /cancelled/i.test(v))).toEqual([]);
  expect(JSON.stringify(doc)).not.toMatch(/"cancelled"/i);
});

test("the rule refuses what it should", () => {
  const at = (values: string[], where = "#/components/schemas/X/properties/kind") =>
    breaksRule({ where, values });
  expect(at(["pastDue"])).toHaveLength(1);
  expect(at(["Past_Due"])).toHaveLength(1);
  expect(at(["user-created"])).toHaveLength(1);
  expect(at(["Active"])).toHaveLength(1);
  expect(at(["Active"], "#/components/schemas/Tenant/properties/status")).toEqual([]);
  expect(at(["users:write", "domains:*", "*", "user.created", "past_due"])).toEqual([]);
  expect(at(["Europe/Berlin", "UTC"])).toEqual([]);
});
