import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import createFetchClient from "openapi-fetch";
import type { paths } from "../../examples/client/schema.d.ts";
import { bunServeOptions } from "../../src/http/bun-serve.ts";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import { tracked } from "../helpers/children.ts";
import { PASSWORD, readyPlatformUser } from "../helpers/identity.ts";

// Two independent generated clients, each built from the document a running API serves and
// neither given a base URL by hand: the document's `servers` carries it. hey-api's generator
// writes it into its client; openapi-fetch is given the document's `servers[0].url`.

const app = useTestApp({ settings: relaxedLimits });
let server: ReturnType<typeof Bun.serve>;
let dir: string;
let document: { servers: { url: string }[] };

beforeAll(async () => {
  server = Bun.serve({ port: 0, ...bunServeOptions(app.app, app.deps) });
  document = (await (
    await fetch(`http://localhost:${server.port}/api/openapi.json`)
  ).json()) as typeof document;
  dir = mkdtempSync(join(tmpdir(), "plinth-hey-api-"));
  writeFileSync(join(dir, "openapi.json"), JSON.stringify(document));
  // the generator needs TypeScript 5's compiler API (the project's TypeScript 7 has none): run from
  // the temporary directory, as scripts/openapi.ts runs openapi-typescript
  // tracked: a generator still running when the file ends (a timeout) is stopped with it
  const generate = tracked(
    Bun.spawn(
      [
        "npx",
        "--yes",
        "-p",
        "typescript@5.9",
        "-p",
        "@hey-api/openapi-ts@0.99.0",
        "openapi-ts",
        "-i",
        "openapi.json",
        "-o",
        "out",
        "-c",
        "@hey-api/client-fetch",
      ],
      { cwd: dir, stdout: "ignore", stderr: "pipe" },
    ),
  );
  if ((await generate.exited) !== 0) throw new Error(await new Response(generate.stderr).text());
}, 180_000);

afterAll(() => {
  server.stop(true);
  rmSync(dir, { recursive: true, force: true });
});

test("the document's server is where the API answers", () => {
  expect(document.servers[0]?.url).toBe(`http://localhost:${server.port}`);
});

test("hey-api's generated client: sign in → tenant → user → list, with no base URL set by hand", async () => {
  // biome-ignore lint/suspicious/noExplicitAny: the generated module is written at test time
  const sdk: any = await import(join(dir, "out", "sdk.gen.ts"));
  const admin = await readyPlatformUser(app.db);
  const signedIn = await sdk.signIn({ body: { email: admin.email, password: PASSWORD } });
  expect(signedIn.response.status).toBe(200);
  const headers = { authorization: `Bearer ${signedIn.data.accessToken}` };
  const code = `hey${crypto.randomUUID().slice(0, 6)}`;
  const tenant = await sdk.adminCreateTenant({ body: { code, name: "Hey" }, headers });
  expect(tenant.response.status).toBe(201);
  const user = await sdk.adminCreateTenantUser({
    path: { tenantId: tenant.data.id },
    body: { email: `owner@${code}.example`, name: "Owner", password: PASSWORD, role: "owner" },
    headers,
  });
  expect(user.response.status).toBe(201);
  const codes: string[] = [];
  let cursor: string | undefined;
  do {
    const page = await sdk.adminListTenants({ query: { limit: 50, cursor }, headers });
    expect(page.response.status).toBe(200);
    codes.push(...page.data.items.map((t: { code: string }) => t.code));
    cursor = page.data.nextCursor ?? undefined;
  } while (cursor);
  expect(codes).toContain(code);
});

test("openapi-fetch over the document's server: sign in → tenant → user → list", async () => {
  const api = createFetchClient<paths>({ baseUrl: document.servers[0]?.url });
  const admin = await readyPlatformUser(app.db);
  const signedIn = await api.POST("/api/auth/login", { body: { email: admin.email, password: PASSWORD } });
  expect(signedIn.response.status).toBe(200);
  if (!signedIn.data || "mfaRequired" in signedIn.data) throw new Error("no second factor was enrolled");
  const headers = { authorization: `Bearer ${signedIn.data.accessToken}` };
  const code = `fet${crypto.randomUUID().slice(0, 6)}`;
  const tenant = await api.POST("/api/admin/tenants", { body: { code, name: "Fetch" }, headers });
  expect(tenant.response.status).toBe(201);
  const tenantId = tenant.data?.id ?? "";
  const user = await api.POST("/api/admin/tenants/{tenantId}/users", {
    params: { path: { tenantId } },
    body: { email: `owner@${code}.example`, name: "Owner", password: PASSWORD, role: "owner" },
    headers,
  });
  expect(user.response.status).toBe(201);
  const page = await api.GET("/api/admin/tenants", { params: { query: { limit: 200 } }, headers });
  expect(page.response.status).toBe(200);
  expect(page.data?.items.map((t) => t.code)).toContain(code);
});
