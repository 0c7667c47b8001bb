import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import type { Browser } from "playwright-core";
import { useTestApp } from "../helpers/app.ts";
import { CHROMIUM, launchChromium } from "../helpers/chromium.ts";

// /api/docs renders in a real browser with no network but the API itself: the viewer's assets are
// served by the API (from the @scalar/api-reference package), and its policy allows nothing else.

const app = useTestApp();
let server: ReturnType<typeof Bun.serve>;
let browser: Browser;

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`Chromium is missing at ${CHROMIUM}: install it with \`sh scripts/setup.sh --services\``);
  }
  server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: (request, s) => app.app.fetch(request, { peerAddress: s.requestIP(request)?.address }),
  });
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await server?.stop(true);
});

test("/api/docs lists the operations in a browser that can reach nothing but the API", async () => {
  const origin = `http://127.0.0.1:${server.port}`;
  const context = await browser.newContext();
  const blocked: string[] = [];
  const local: string[] = [];
  // every request that is not to the local server fails, as on a network without a CDN
  await context.route("**/*", async (route) => {
    const url = route.request().url();
    if (url.startsWith(`${origin}/`)) {
      local.push(new URL(url).pathname);
      await route.continue();
    } else {
      blocked.push(url);
      await route.abort("internetdisconnected");
    }
  });
  const page = await context.newPage();
  const problems: string[] = [];
  page.on("console", (message) => {
    if (message.type() === "error" && /Content Security Policy|Refused to/i.test(message.text()))
      problems.push(message.text());
  });
  page.on("pageerror", (error) => problems.push(error.message));

  const response = await page.goto(`${origin}/api/docs`);
  expect(response?.status()).toBe(200);
  expect(response?.headers()["content-security-policy"]).toContain("default-src 'self'");
  // operations listed, rendered from /api/openapi.json by the viewer: a summary and a path of the
  // first group (the viewer opens the first tag's group; the others start collapsed)
  const doc = (await (await app.request("/api/openapi.json")).json()) as {
    paths: Record<string, { post?: { summary?: string } }>;
  };
  const summary = doc.paths["/api/auth/login"]?.post?.summary ?? "(no summary)";
  await page.getByText(summary).first().waitFor({ timeout: 20_000 });
  const text = (await page.locator("body").textContent()) ?? "";
  expect(text).toContain(summary);
  expect(text).toContain("/api/auth/login");
  expect(local).toContain("/api/openapi.json");
  expect(local.some((path) => path.startsWith("/api/docs/assets/standalone-"))).toBe(true);
  expect(blocked).toEqual([]);
  expect(problems).toEqual([]);
  await context.close();
}, 60_000);

test("the page references only local URLs and its assets are cacheable", async () => {
  const response = await app.request("/api/docs");
  const html = await response.text();
  expect(html).not.toMatch(/(src|href)="(https?:)?\/\//);
  const script = /src="(\/api\/docs\/assets\/standalone-[^"]+)"/.exec(html)?.[1] ?? "";
  const bundle = await app.request(script, { headers: { "accept-encoding": "gzip" } });
  expect(bundle.status).toBe(200);
  expect(bundle.headers.get("content-encoding")).toBe("gzip");
  expect(bundle.headers.get("cache-control")).toContain("immutable");
  expect((await app.request("/api/docs/assets/standalone-0.0.0.js")).status).toBe(404);
});
