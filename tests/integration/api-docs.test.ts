import { expect, test } from "bun:test";
import { useTestApp } from "../helpers/app.ts";

const app = useTestApp();

test("/api/docs is an HTML reference page over /api/openapi.json", async () => {
  const res = await app.request("/api/docs");
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toContain("text/html");
  const html = await res.text();
  expect(html).toContain("Plinth API");
  // the viewer is started by a script of the API's own, over the document
  expect(html).toContain('src="/api/docs/assets/init.js"');
  expect(await (await app.request("/api/docs/assets/init.js")).text()).toContain('"/api/openapi.json"');
  const doc = await app.request("/api/openapi.json");
  expect(doc.status).toBe(200);
  const openapi = (await doc.json()) as { openapi: string; paths: Record<string, unknown> };
  expect(openapi.openapi).toBe("3.1.0");
  expect(Object.keys(openapi.paths)).toContain("/api/health");
});
