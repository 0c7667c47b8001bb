import { createHash } from "node:crypto";
import { z } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { defineArea } from "../area.ts";
import { apiRoute, headerRef } from "../openapi.ts";
import { createRouter } from "../request-context.ts";

/**
 * How long a client may keep the JWK set (`Cache-Control: max-age`). Short, so a key removed in a
 * rotation (or after a leak) stops verifying elsewhere within a minute; the ETag makes the re-check
 * cheap (304). docs/runbooks/key-rotation.md states it.
 */
export const JWKS_MAX_AGE_SECONDS = 60;

/** What both answers carry: the set's ETag and how long it may be kept (RFC 9110: a 304 repeats them). */
const caching = { ETag: headerRef("ETag"), "Cache-Control": headerRef("Cache-Control") };

const jwks = apiRoute("public", {
  method: "get",
  path: "/.well-known/jwks.json",
  operationId: "getJwks",
  tags: ["auth"],
  summary: "Public keys that verify Plinth's access tokens (every key of the verification set).",
  request: {
    headers: z.object({
      "if-none-match": z
        .string()
        .max(1024)
        .optional()
        .openapi({ description: "An `ETag` of an earlier answer: 304 while the set is unchanged." }),
    }),
  },
  responses: {
    200: {
      description: `JWK set; a client may keep it ${JWKS_MAX_AGE_SECONDS} s (\`Cache-Control\`) and revalidate with its \`ETag\`.`,
      headers: caching,
      content: {
        "application/json": {
          schema: z.object({ keys: z.array(z.record(z.string(), z.unknown())) }).openapi("JwkSet"),
        },
      },
    },
    304: {
      description: "Not modified: `If-None-Match` named the set's current `ETag` (no body).",
      headers: caching,
    },
  },
});

export function wellKnownRoutes(deps: Deps) {
  const body = deps.tokens.jwks();
  // Not through the shared output cache: the set lives in this process's memory, and a cached copy
  // would outlive a rotation by its TTL. The ETag is the set's own fingerprint, so it changes with it.
  const etag = `"${createHash("sha256").update(JSON.stringify(body)).digest("base64url").slice(0, 27)}"`;
  const cacheControl = `public, max-age=${JWKS_MAX_AGE_SECONDS}`;
  return createRouter().openapi(jwks, (c) => {
    c.header("cache-control", cacheControl);
    c.header("etag", etag);
    const match = c.req.header("if-none-match");
    if (match?.split(",").some((tag) => tag.trim().replace(/^W\//, "") === etag)) return c.body(null, 304);
    return c.json(body, 200);
  });
}

/** The area (src/http/area.ts): listed in src/http/areas.ts, which `bun run areas:generate` writes. */
export const wellKnownArea = defineArea({ name: "well-known", routes: [wellKnownRoutes] });
