import { expect, test } from "bun:test";
import Ajv2020, { type ValidateFunction } from "ajv/dist/2020";
import addFormats from "ajv-formats";
import { createGeneratorSync } from "json-schema-faker";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import { newMasterKey, signedInPlatformAdmin, signedInTenant } from "../helpers/identity.ts";

// A schema-driven fuzz run over every operation of the document: json-schema-faker (seeded, so
// every run sends the same requests) makes each operation's path parameters, query and body from
// their schemas; each operation gets a valid request, an invalid one and, for every string field
// it takes, one with a NUL in that field. The harness (useTestApp) checks every answer against the
// document: a declared status, a body on its schema, problem+json errors, the declared headers.
// Here: no 5xx, and the NUL is a 400 `validation_failed` naming the field, on every operation; and
// no request the document allows is refused with a 400: the "valid" request is checked against the
// document (Ajv) before it counts as valid, and a parameter the document says comes from an earlier
// answer (a `next` link's `$response…` value: the list cursors) is left out of it and sent alone,
// faked, where it must be a 400 naming it.

// every host name resolves (to loopback, which `Webhooks:AllowPrivateDestinations` and
// `Sso:AllowPrivateProviders` let through): a webhook URL's host is the receiver's to provide, an
// issuer's the identity provider's, not the document's to state
const app = useTestApp({
  hostResolver: async () => [{ address: "127.0.0.1", family: 4 }],
  settings: {
    ...relaxedLimits,
    "Webhooks:AllowPrivateDestinations": "true",
    "Sso:AllowPrivateProviders": "true",
    "Security:TenantSecrets:KeyId": "fuzz",
    "Security:TenantSecrets:MasterKey": newMasterKey(),
  },
});

const SEED = 20261126;

interface Schema {
  $ref?: string;
  type?: string | string[];
  properties?: Record<string, Schema>;
  items?: Schema;
  format?: string;
  [key: string]: unknown;
}
interface Parameter {
  name: string;
  in: "path" | "query" | "header" | "cookie";
  required?: boolean;
  schema?: Schema;
  $ref?: string;
}
interface Operation {
  operationId: string;
  parameters?: Parameter[];
  requestBody?: { content: Record<string, { schema: Schema }> };
  responses: Record<
    string,
    { links?: Record<string, { operationId?: string; parameters?: Record<string, string> }> }
  >;
}
interface Doc {
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, Schema>; parameters: Record<string, Parameter> };
}

interface Case {
  label: string;
  method: string;
  path: string;
  query: Record<string, string>;
  body?: unknown;
  /** The field a NUL (or a value only an earlier answer can give) was put in: a 400 naming it. */
  nulField?: string;
  /** A 404 for the made-up resource of the path is as good as the 400 naming `nulField`. */
  notFoundFirst?: boolean;
  /** The document allows this request (checked with Ajv): a 400 is a refusal it does not state. */
  allowed?: boolean;
}

/** The parameters of `op` its own links fill from an earlier answer (`$response.body#/nextCursor`). */
function issuedParameters(op: Operation): Set<string> {
  const names = new Set<string>();
  for (const response of Object.values(op.responses))
    for (const link of Object.values(response.links ?? {}))
      if (link.operationId === op.operationId)
        for (const [name, value] of Object.entries(link.parameters ?? {}))
          if (value.startsWith("$response.")) names.add(name);
  return names;
}

test("every operation, fuzzed from its schemas: no 5xx, every answer as documented, every NUL a 400 naming its field", async () => {
  const doc = (await (await app.request("/api/openapi.json")).json()) as Doc;
  const admin = await signedInPlatformAdmin(app);
  const tenant = await signedInTenant(app, { plan: "enterprise" });
  const options = {
    seed: SEED,
    optionalsProbability: 0.5,
    maxItems: 3,
    maxLength: 40,
    // times to come: an API key's `expiresAt` must be in the future, a rule its description states
    // and no JSON Schema keyword can (filters and periods take any time)
    minDateTime: "2035-01-01T00:00:00Z",
    maxDateTime: "2040-01-01T00:00:00Z",
  };
  const generator = createGeneratorSync({ ...options, alwaysFakeOptionals: false });
  // json-schema-faker cannot meet `minProperties` when it skipped every optional property of an
  // object closed by `additionalProperties: false` (the bulk job filters): it throws instead. Such
  // a schema is faked again with every optional property filled, from a generator of its own, so
  // the run stays the same for every other schema whatever the document adds.
  const filled = createGeneratorSync({ ...options, alwaysFakeOptionals: true });
  // what "allowed by the document" means: Ajv over the document's own schemas (query and path
  // values are strings on the wire: coerced to the declared type, as the server's zod does)
  const validators = (coerceTypes: boolean) => {
    const ajv = new Ajv2020({ strict: false, coerceTypes });
    addFormats(ajv);
    ajv.addSchema({ ...doc, $id: "openapi" });
    const compiled = new Map<Schema, ValidateFunction>();
    return (schema: Schema, value: unknown) => {
      let validate = compiled.get(schema);
      if (!validate) {
        // the document's `#/components/…` references, resolved in the document added above
        validate = ajv.compile(
          JSON.parse(JSON.stringify(schema).replaceAll('"#/components/', '"openapi#/components/')),
        );
        compiled.set(schema, validate);
      }
      return validate(value) as boolean;
    };
  };
  const bodyAllowed = validators(false);
  const parameterAllowed = validators(true);
  const deref = (schema: Schema): Schema =>
    schema.$ref ? deref(doc.components.schemas[schema.$ref.split("/").pop() ?? ""] ?? {}) : schema;
  const fake = (schema: Schema): unknown => {
    const full = { ...schema, components: doc.components } as never;
    try {
      return generator.generate(full);
    } catch (error) {
      if (!/additionalProperties is false/.test((error as Error).message)) throw error;
      return filled.generate(full);
    }
  };
  const text = (value: unknown) => (typeof value === "string" ? value : JSON.stringify(value));
  const isString = (schema: Schema | undefined) => {
    const s = schema ? deref(schema) : undefined;
    return s?.type === "string" || (Array.isArray(s?.type) && s.type.includes("string"));
  };

  const cases: Case[] = [];
  /** Operations that state a 503: a part this test app has not configured (object storage). */
  const unavailable = new Set<string>();
  for (const [template, item] of Object.entries(doc.paths))
    for (const [method, op] of Object.entries(item)) {
      const parameters = (op.parameters ?? []).map((p) =>
        p.$ref ? (doc.components.parameters[p.$ref.split("/").pop() ?? ""] as Parameter) : p,
      );
      const pathParams = parameters.filter((p) => p.in === "path");
      const queryParams = parameters.filter((p) => p.in === "query");
      const pathValue = (p: Parameter) =>
        p.name === "tenantId" ? tenant.id : text(fake(p.schema ?? { type: "string", minLength: 1 })) || "x";
      const build = (values: Record<string, string>) =>
        template.replaceAll(/\{(\w+)\}/g, (_, name: string) => encodeURIComponent(values[name] ?? "x"));
      const pathValues = Object.fromEntries(pathParams.map((p) => [p.name, pathValue(p)]));
      const issued = issuedParameters(op);
      const query: Record<string, string> = {};
      for (const p of queryParams.filter((q) => !issued.has(q.name))) {
        const value = fake(p.schema ?? { type: "string" });
        if (p.required || value !== undefined) query[p.name] = text(value);
      }
      const bodySchema = op.requestBody?.content["application/json"]?.schema;
      // a body in another media type (a SAML ACS form) is not sent: that request is not one the document allows
      const unsentBody = op.requestBody !== undefined && bodySchema === undefined;
      const body = bodySchema ? fake(bodySchema) : undefined;
      const label = `${method.toUpperCase()} ${template}`;
      const allowed =
        pathParams.every((p) => !p.schema || parameterAllowed(p.schema, pathValues[p.name])) &&
        queryParams.every(
          (p) => query[p.name] === undefined || !p.schema || parameterAllowed(p.schema, query[p.name]),
        ) &&
        !unsentBody &&
        (bodySchema === undefined || bodyAllowed(bodySchema, body));
      if (op.responses["503"] !== undefined) unavailable.add(label);
      cases.push({ label: `${label} (valid)`, method, path: build(pathValues), query, body, allowed });
      // a value the document says only an earlier answer gives, made up: refused, naming it
      for (const p of queryParams.filter((q) => issued.has(q.name)))
        cases.push({
          label: `${label} (${p.name} not from an earlier answer)`,
          method,
          path: build(pathValues),
          query: { ...query, [p.name]: text(fake(p.schema ?? { type: "string" })) },
          body,
          nulField: p.name,
          // a path naming a made-up resource is looked up first
          notFoundFirst: pathParams.some((q) => q.name !== "tenantId"),
        });
      if (bodySchema)
        cases.push({
          label: `${label} (invalid body)`,
          method,
          path: build(pathValues),
          query,
          body: [null, 1, "x"],
        });
      for (const p of queryParams.filter((q) => isString(q.schema)))
        cases.push({
          label: `${label} NUL in ${p.name}`,
          method,
          path: build(pathValues),
          query: { ...query, [p.name]: "a\u0000b" },
          body,
          nulField: p.name,
        });
      for (const p of pathParams)
        cases.push({
          label: `${label} NUL in ${p.name}`,
          method,
          path: build({ ...pathValues, [p.name]: "a\u0000b" }),
          query,
          body,
          nulField: p.name,
        });
      const properties = bodySchema ? (deref(bodySchema).properties ?? {}) : {};
      if (body && typeof body === "object" && !Array.isArray(body))
        for (const [name] of Object.entries(properties).filter(([, s]) => isString(s)))
          cases.push({
            label: `${label} NUL in body ${name}`,
            method,
            path: build(pathValues),
            query,
            body: { ...body, [name]: "a\u0000b" },
            nulField: name,
          });
    }

  // the operations that end the fuzzing principals' sessions last, or every operation after them
  // would only prove a 401: reads first, then changes (some end sessions), then signing out (the
  // member's session), then the admin operations (a tenant suspended, its subscription canceled)
  const endsSessions = (c: Case) =>
    c.path.startsWith("/api/admin/")
      ? 3
      : /^\/api\/auth\/(browser\/)?logout$/.test(c.path)
        ? 2
        : c.method === "get"
          ? 0
          : 1;
  cases.sort((a, b) => endsSessions(a) - endsSessions(b));
  const failures: string[] = [];
  // requests the document allows that the server refused with a 400: a rule the document omits
  const refusedValid: string[] = [];
  const statuses = new Map<number, number>();
  for (const c of cases) {
    const headers: Record<string, string> = c.path.startsWith("/api/admin/")
      ? { ...admin.headers }
      : c.path.startsWith("/api/tenant/")
        ? { ...tenant.owner.headers }
        : c.path.startsWith("/api/auth/")
          ? { ...tenant.member.headers }
          : {};
    if (c.body !== undefined) headers["content-type"] = "application/json";
    const search = new URLSearchParams(c.query).toString();
    let response: Response;
    try {
      response = await app.request(`${c.path}${search ? `?${search}` : ""}`, {
        method: c.method.toUpperCase(),
        headers,
        body: c.body === undefined ? undefined : JSON.stringify(c.body),
      });
    } catch (error) {
      failures.push(`${c.label}: ${(error as Error).message.split("\n")[0]}`);
      continue;
    }
    statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
    const refusal =
      c.allowed && (response.status === 400 || response.status === 422)
        ? (((await response.clone().json()) as { errors?: { path: string }[] }).errors ?? [{ path: "" }]).map(
            (e) => e.path,
          )
        : [];
    // a made-up mailed token (reset, verification, invitation, sign-up) is a 404, as a dead link
    // is: the document states it, and no 400 is excused
    if (refusal.length > 0)
      refusedValid.push(
        `${c.label}: ${JSON.stringify(((await response.clone().json()) as { errors?: unknown[] }).errors)} ${JSON.stringify(c.body)?.slice(0, 300)}`,
      );
    // the test app has no object storage: a 503 the operation states is its answer, any other 5xx fails
    const stated503 = [...unavailable].some((op) => c.label.startsWith(`${op} `));
    if (response.status >= 500 && !(response.status === 503 && stated503))
      failures.push(`${c.label}: ${response.status} ${await response.text()}`);
    else if (c.nulField) {
      const problem = (await response.json().catch(() => ({}))) as {
        code?: string;
        errors?: { path: string }[];
        scimType?: string;
        detail?: string;
      };
      // a SCIM error (docs/scim.md) names the field in its detail, as `invalidValue`
      if (c.path.startsWith("/scim/v2/") && problem.scimType === "invalidValue") {
        problem.code = "validation_failed";
        problem.errors = [{ path: /(?:^|\. )([\w.]+): /.exec(problem.detail ?? "")?.[1] ?? "" }];
      }
      // a segment no route's pattern matches (`/api/docs/assets/{file}` takes `standalone-….js`) is
      // named `path`: no operation's parameter holds it
      const named = problem.errors?.some(
        (e) => e.path === c.nulField || e.path.startsWith(`${c.nulField}.`) || e.path === "path",
      );
      if (c.notFoundFirst && response.status === 404) continue;
      if (response.status !== 400 || problem.code !== "validation_failed" || !named)
        failures.push(`${c.label}: ${response.status} ${JSON.stringify(problem)}`);
    } else await response.arrayBuffer();
  }
  console.log(
    `contract fuzz: ${cases.length} requests (${cases.filter((c) => c.allowed).length} allowed by the document), statuses ${JSON.stringify(Object.fromEntries(statuses))}`,
  );
  expect(failures).toEqual([]);
  expect(refusedValid).toEqual([]);
  // most operations get a request the document allows (the rest: a generated body off its schema)
  expect(cases.filter((c) => c.allowed).length).toBeGreaterThan(80);
  expect(cases.length).toBeGreaterThan(250);
}, 120_000);
