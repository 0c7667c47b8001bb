import { beforeAll, expect, test } from "bun:test";
import { useTestApp } from "../helpers/app.ts";
import { ContractViolation, type OpenApiDocument, responseValidator } from "../helpers/openapi-validator.ts";

const app = useTestApp();
beforeAll(() => {
  // a stand-in route of the test itself (added before the first request builds the router)
  app.app.get("/api/stand-in-for-test", (c) => c.json({ ok: true }));
});

interface Op {
  operationId?: string;
  tags?: string[];
  summary?: string;
  security?: unknown[];
  requestBody?: { content: Record<string, { schema: { $ref?: string } }> };
  responses: Record<string, { content?: Record<string, { schema: { $ref?: string } }> }>;
}

async function document() {
  return (await (await app.request("/api/openapi.json")).json()) as {
    paths: Record<string, Record<string, Op>>;
    servers?: unknown[];
    info: { license?: unknown; contact?: unknown };
  };
}

test("every operation has an operationId, a tag, a summary, its security, named bodies and Problem errors", async () => {
  const doc = await document();
  expect(doc.servers?.length).toBeGreaterThan(0);
  expect(doc.info.license).toBeDefined();
  expect(doc.info.contact).toBeDefined();
  const ids = new Set<string>();
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(item)) {
      const where = `${method} ${path}`;
      expect(op.operationId, where).toMatch(/^[a-z][A-Za-z0-9]*$/);
      expect(ids.has(op.operationId ?? ""), where).toBe(false);
      ids.add(op.operationId ?? "");
      expect(op.tags?.length, where).toBeGreaterThan(0);
      expect(op.summary, where).toBeTruthy();
      expect(Array.isArray(op.security), where).toBe(true);
      for (const [type, media] of Object.entries(op.requestBody?.content ?? {}))
        expect(media.schema.$ref, `${where} request ${type}`).toBeDefined();
      for (const [status, response] of Object.entries(op.responses)) {
        for (const [type, media] of Object.entries(response.content ?? {})) {
          expect(media.schema.$ref, `${where} ${status} ${type}`).toBeDefined();
          if (Number(status) >= 400 && !path.startsWith("/api/health"))
            // SCIM clients read SCIM errors (RFC 7644 §3.12, docs/scim.md), everyone else a Problem
            expect([type, media.schema.$ref], where).toEqual(
              path.startsWith("/scim/v2/")
                ? ["application/scim+json", "#/components/schemas/ScimError"]
                : ["application/problem+json", "#/components/schemas/Problem"],
            );
        }
      }
      if (!path.startsWith("/api/health"))
        for (const status of ["400", "413", "429", "500"])
          expect(op.responses[status], `${where} ${status}`).toBeDefined();
      if (op.security?.length)
        for (const status of ["401", "403"]) expect(op.responses[status], where).toBeDefined();
    }
  }
  expect(ids.size).toBeGreaterThan(50);
});

test("an answer of a path the document does not list fails; a test's own stand-in route is not checked", async () => {
  const doc: OpenApiDocument = { paths: {} };
  await expect(
    responseValidator(doc)(new Request("http://localhost/api/undeclared"), Response.json({ ok: true })),
  ).rejects.toThrow(ContractViolation);
  // an unknown path answering 404 as a Problem is what the document allows
  expect((await app.request("/api/no-such-thing")).status).toBe(404);
  expect((await app.request("/api/stand-in-for-test")).status).toBe(200);
});

test("a known path with a method it does not answer: 405 Problem with Allow, accepted by the harness", async () => {
  // the document's own answer for a known path with an unanswered method must be a 405 Problem with Allow
  const response = await app.request("/api/plans", { method: "DELETE" });
  expect(response.status).toBe(405);
  expect(response.headers.get("allow")).toContain("GET");
});

test("an undeclared status, an undeclared header or a body off the schema is a violation", async () => {
  const doc: OpenApiDocument = {
    paths: {
      "/x/{id}": {
        get: {
          responses: {
            "200": {
              headers: { "X-Request-Id": { $ref: "#/components/headers/X-Request-Id" } },
              content: {
                "application/json": {
                  schema: { type: "object", required: ["id"], properties: { id: { type: "string" } } },
                },
              },
            },
          },
        },
      },
    },
    components: { headers: { "X-Request-Id": { required: true } } },
  };
  const check = responseValidator(doc);
  const request = new Request("http://localhost/x/1");
  const ok = Response.json({ id: "1" }, { headers: { "x-request-id": "r" } });
  await check(request, ok);
  await expect(check(request, Response.json({ id: "1" }))).rejects.toThrow(
    /required header X-Request-Id missing/,
  );
  const withId = { headers: { "x-request-id": "r" } };
  await expect(check(request, Response.json({ id: 1 }, withId))).rejects.toThrow(/does not match/);
  await expect(check(request, Response.json({ id: "1" }, { status: 201 }))).rejects.toThrow(/not declared/);
  await expect(
    check(request, Response.json({ id: "1" }, { headers: { "retry-after": "1", "x-request-id": "r" } })),
  ).rejects.toThrow(/retry-after not declared/);
  await expect(
    check(request, new Response("hi", { headers: { "content-type": "text/plain", "x-request-id": "r" } })),
  ).rejects.toThrow(/content type text\/plain not declared/);
  // an ETag is a header a client relies on: declared where sent, and on its schema
  await expect(
    check(request, Response.json({ id: "1" }, { headers: { etag: '"a"', "x-request-id": "r" } })),
  ).rejects.toThrow(/etag not declared/);
});

test("a declared header that is sent must match its schema", async () => {
  const doc: OpenApiDocument = {
    paths: {
      "/keys": {
        get: {
          responses: {
            "304": {
              headers: {
                "X-Request-Id": { $ref: "#/components/headers/X-Request-Id" },
                ETag: { $ref: "#/components/headers/ETag" },
                "Retry-After": { schema: { type: "integer", minimum: 0 } },
              },
            },
          },
        },
      },
    },
    components: {
      headers: {
        "X-Request-Id": { required: true },
        ETag: { required: true, schema: { type: "string", pattern: '^"[A-Za-z0-9_-]{1,64}"$' } },
      },
    },
  };
  const check = responseValidator(doc);
  const request = new Request("http://localhost/keys");
  const answer = (headers: Record<string, string>) => new Response(null, { status: 304, headers });
  await check(request, answer({ "x-request-id": "r", etag: '"abc"' }));
  await expect(check(request, answer({ "x-request-id": "r" }))).rejects.toThrow(
    /required header ETag missing/,
  );
  await expect(check(request, answer({ "x-request-id": "r", etag: "W/abc" }))).rejects.toThrow(
    /header ETag "W\/abc" is off its schema/,
  );
  await expect(
    check(request, answer({ "x-request-id": "r", etag: '"abc"', "retry-after": "-1" })),
  ).rejects.toThrow(/header Retry-After "-1" is off its schema/);
});
