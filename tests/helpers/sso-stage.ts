import { afterAll, beforeAll } from "bun:test";
import type { Browser } from "playwright-core";
import type { Clock } from "../../src/clock.ts";
import { relaxedLimits, type TestHarness, useTestApp } from "./app.ts";
import { launchChromium } from "./chromium.ts";
import { freePort } from "./redis-server.ts";

/** The stage of a single sign-on test: the API on a port of its own, the app it returns to, a browser. */
export interface SsoStage {
  t: TestHarness;
  /** The API's base URL (`Server:PublicBaseUrl`). */
  base: () => string;
  /** The app's origin (`BrowserAuth:AllowedOrigins:0`), a page that says "signed in". */
  appOrigin: () => string;
  browser: () => Browser;
}

/**
 * Registers the stage of an SSO test file: two free ports, the test app served on the first (its
 * public base URL), a stand-in app on the second (its one allowed browser origin), and Chromium; all
 * stopped when the file ends. `settings` adds to the stage's own (relaxed limits, the two addresses).
 * `clock`: the app's clock; `console`: the API's own origin is an allowed browser origin too (the
 * console, served there, takes form posts from it).
 */
export function useSsoStage(
  settings: Record<string, string> = {},
  options: { clock?: Clock; console?: boolean } = {},
): SsoStage {
  let apiPort = 0;
  let appPort = 0;
  let api: ReturnType<typeof Bun.serve> | undefined;
  let appSite: ReturnType<typeof Bun.serve> | undefined;
  let browser: Browser | undefined;
  const base = () => `http://127.0.0.1:${apiPort}`;
  const appOrigin = () => `http://127.0.0.1:${appPort}`;

  beforeAll(async () => {
    apiPort = await freePort();
    appPort = await freePort();
  });
  const t = useTestApp({
    clock: options.clock,
    settings: () => ({
      ...relaxedLimits,
      "Server:PublicBaseUrl": base(),
      "BrowserAuth:AllowedOrigins:0": appOrigin(),
      ...(options.console ? { "BrowserAuth:AllowedOrigins:1": base() } : {}),
      ...settings,
    }),
  });
  beforeAll(async () => {
    api = Bun.serve({
      hostname: "127.0.0.1",
      port: apiPort,
      fetch: (request) => t.app.fetch(request, { peerAddress: "127.0.0.1" }),
    });
    appSite = Bun.serve({
      hostname: "127.0.0.1",
      port: appPort,
      fetch: () =>
        new Response("<!doctype html><title>app</title><p>signed in", {
          headers: { "content-type": "text/html" },
        }),
    });
    browser = await launchChromium();
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    api?.stop(true);
    appSite?.stop(true);
  });

  return {
    t,
    base,
    appOrigin,
    browser: () => {
      if (!browser) throw new Error("the browser is launched in beforeAll");
      return browser;
    },
  };
}
