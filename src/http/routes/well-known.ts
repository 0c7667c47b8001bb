import { z } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { createRouter } from "../context.ts";
import { outputCacheFor } from "../middleware/output-cache.ts";
import { apiRoute } from "../openapi.ts";

const jwks = apiRoute("public", {
  method: "get",
  path: "/.well-known/jwks.json",
  operationId: "getJwks",
  tags: ["auth"],
  summary: "Public keys that verify Plinth's access tokens (every key of the verification set).",
  responses: {
    200: {
      description: "JWK set.",
      content: {
        "application/json": {
          schema: z.object({ keys: z.array(z.record(z.string(), z.unknown())) }).openapi("JwkSet"),
        },
      },
    },
  },
});

export function wellKnownRoutes(deps: Deps) {
  const body = deps.tokens.jwks();
  const router = createRouter();
  // anonymous and the same for everyone: served from the output cache in Production
  router.use("/.well-known/jwks.json", outputCacheFor(deps));
  return router.openapi(jwks, (c) => {
    c.header("cache-control", "public, max-age=300");
    return c.json(body, 200);
  });
}
