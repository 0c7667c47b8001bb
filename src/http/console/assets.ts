import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { Hono } from "hono";
import { AppError } from "../../errors.ts";
import type { AppEnv } from "../request-context.ts";

/**
 * The console's static files, served by the API itself (no CDN: it works on a closed network):
 * htmx from the pinned `htmx.org` package, @simplewebauthn/browser's bundle, the console's own
 * stylesheet and passkey script. Each URL carries a
 * hash of the content, so it is cached for a year and a new release is a new URL.
 */
export const CONSOLE_ASSETS = "/console/assets";

interface Asset {
  /** The URL path, with the content hash in the name. */
  path: string;
  type: string;
  raw: Uint8Array<ArrayBuffer>;
  gzip: Uint8Array<ArrayBuffer>;
  etag: string;
}

/** One asset from its files, in order (the console's stylesheet is two). */
function asset(name: string, extension: string, type: string, ...files: string[]): Asset {
  const raw = new Uint8Array(Buffer.concat(files.map((file) => readFileSync(file))));
  const hash = createHash("sha256").update(raw).digest("hex").slice(0, 16);
  return {
    path: `${CONSOLE_ASSETS}/${name}.${hash}.${extension}`,
    type,
    raw,
    gzip: new Uint8Array(gzipSync(raw, { level: 9 })),
    etag: `"${hash}"`,
  };
}

interface ConsoleAssets {
  htmx: Asset;
  css: Asset;
  /** @simplewebauthn/browser's bundle (the global `SimpleWebAuthnBrowser`) and the console's passkey script. */
  webauthn: Asset;
  passkeys: Asset;
}

const JS = "text/javascript; charset=utf-8";

let loaded: ConsoleAssets | undefined;
/** Read, hashed and compressed once, on first use. */
export function consoleAssets(): ConsoleAssets {
  if (!loaded) {
    const htmxDist = dirname(fileURLToPath(import.meta.resolve("htmx.org/dist/htmx.min.js")));
    const webauthnDist = dirname(fileURLToPath(import.meta.resolve("@simplewebauthn/browser")));
    loaded = {
      htmx: asset("htmx", "js", JS, join(htmxDist, "htmx.min.js")),
      webauthn: asset("webauthn", "js", JS, join(webauthnDist, "..", "dist", "bundle", "index.umd.min.js")),
      passkeys: asset("passkeys", "js", JS, fileURLToPath(new URL("./passkeys.js", import.meta.url))),
      css: asset(
        "console",
        "css",
        "text/css; charset=utf-8",
        fileURLToPath(new URL("./console.css", import.meta.url)),
        fileURLToPath(new URL("./console-narrow.css", import.meta.url)),
      ),
    };
  }
  return loaded;
}

/** `GET /console/assets/<name>.<hash>.<ext>`: only the current hash of each file; gzip when asked. */
export function consoleAssetRoutes() {
  const router = new Hono<AppEnv>();
  router.get(`${CONSOLE_ASSETS}/:file`, (c) => {
    const found = Object.values(consoleAssets()).find((a) => a.path === c.req.path);
    if (!found) throw new AppError("not_found", "No such asset.");
    const headers: Record<string, string> = {
      "content-type": found.type,
      "cache-control": "public, max-age=31536000, immutable",
      etag: found.etag,
      vary: "accept-encoding",
      "x-content-type-options": "nosniff",
    };
    if (c.req.header("if-none-match") === found.etag) return c.body(null, 304, headers);
    const gzip = /\bgzip\b/.test(c.req.header("accept-encoding") ?? "");
    if (gzip) headers["content-encoding"] = "gzip";
    return c.body(gzip ? found.gzip : found.raw, 200, headers);
  });
  return router;
}
