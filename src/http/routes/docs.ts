import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { Hono } from "hono";
import { AppError } from "../../errors.ts";
import { guardOf } from "../middleware/guards.ts";
import type { AppEnv } from "../request-context.ts";

/**
 * `/api/docs`: the API reference viewer (Scalar) over `/api/openapi.json`, served entirely by the
 * API: the viewer's browser bundle comes from the `@scalar/api-reference` npm package
 * (`dist/browser/standalone.js`), so the page works on a network without a CDN, and its
 * Content-Security-Policy lets it load nothing from anywhere else.
 */
export const DOCS_PATH = "/api/docs";
const ASSETS = `${DOCS_PATH}/assets`;

/** What the viewer is told: the document, and nothing that would reach out (fonts, telemetry, AI agent). */
const VIEWER_CONFIG = {
  url: "/api/openapi.json",
  withDefaultFonts: false,
  telemetry: false,
  agent: { disabled: true },
};

/** The page's script, a file of its own so the policy needs no inline script. */
const INIT_SCRIPT = `window.Scalar.createApiReference("#app", ${JSON.stringify(VIEWER_CONFIG)});\n`;

interface Bundle {
  version: string;
  raw: Uint8Array;
  gzip: Uint8Array;
}

let bundle: Bundle | undefined;
/** Read (and compressed) once, on first use: 4 MB the process needs only when someone opens the docs. */
function viewerBundle(): Bundle {
  if (!bundle) {
    const dist = dirname(fileURLToPath(import.meta.resolve("@scalar/api-reference")));
    const { version } = JSON.parse(readFileSync(join(dist, "..", "package.json"), "utf8")) as {
      version: string;
    };
    const raw = readFileSync(join(dist, "browser", "standalone.js"));
    bundle = { version, raw, gzip: gzipSync(raw) };
  }
  return bundle;
}

/**
 * Only this origin, for everything: scripts, the document, images, fonts. Styles are the one
 * exception to "files only": the viewer (Vue) creates `<style>` elements and `style` attributes at
 * run time without a nonce (a nonce-only policy blocked eight of them in Chromium), so styles may be
 * inline; they still load from no other origin. Scripts stay strictly `'self'`.
 */
const PAGE_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join("; ");

function page(bundlePath: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Plinth API</title>
<link rel="icon" href="/favicon.ico" type="image/svg+xml">
</head>
<body>
<div id="app"></div>
<script src="${bundlePath}"></script>
<script src="${ASSETS}/init.js"></script>
</body>
</html>
`;
}

/** The icon browsers ask every page's origin for (the console, the reference page): Plinth's plinth. */
export const FAVICON_SVG = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="6" fill="#1f2937"/><rect x="7" y="8" width="18" height="4" fill="#e5e7eb"/><rect x="10" y="12" width="12" height="10" fill="#9ca3af"/><rect x="5" y="22" width="22" height="4" fill="#e5e7eb"/></svg>\n`;

/** The reference page, its assets and the favicon, all from this origin. */
export function docsRoutes() {
  const router = new Hono<AppEnv>();
  // public, declared like every route's access (src/http/access.ts)
  const open = guardOf("public");
  // an SVG under the name browsers ask for: every current browser reads the type, not the name
  router.get("/favicon.ico", open, (c) =>
    c.body(FAVICON_SVG, 200, {
      "content-type": "image/svg+xml",
      "cache-control": "public, max-age=86400",
    }),
  );
  router.get(DOCS_PATH, open, (c) => {
    return c.html(page(`${ASSETS}/standalone-${viewerBundle().version}.js`), 200, {
      "content-security-policy": PAGE_POLICY,
      "cache-control": "public, max-age=300",
    });
  });
  router.get(`${ASSETS}/init.js`, open, (c) =>
    c.body(INIT_SCRIPT, 200, {
      "content-type": "text/javascript; charset=utf-8",
      "cache-control": "public, max-age=3600",
    }),
  );
  router.get(`${ASSETS}/:file{standalone-[0-9A-Za-z.+-]+\\.js}`, open, (c) => {
    const viewer = viewerBundle();
    // the name carries the version: a new package version is a new URL, so this one never changes
    if (c.req.param("file") !== `standalone-${viewer.version}.js`)
      throw new AppError("not_found", "No such asset.");
    const gzip = /\bgzip\b/.test(c.req.header("accept-encoding") ?? "");
    const headers: Record<string, string> = {
      "content-type": "text/javascript; charset=utf-8",
      "cache-control": "public, max-age=31536000, immutable",
      vary: "accept-encoding",
    };
    if (gzip) headers["content-encoding"] = "gzip";
    return c.body((gzip ? viewer.gzip : viewer.raw) as Uint8Array<ArrayBuffer>, 200, headers);
  });
  return router;
}
