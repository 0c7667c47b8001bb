import { createRoute, z } from "@hono/zod-openapi";
import type { TokenService } from "../../auth/tokens.ts";
import { createRouter } from "../context.ts";

const jwks = createRoute({
  method: "get",
  path: "/.well-known/jwks.json",
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

export function wellKnownRoutes(tokens: TokenService) {
  const body = tokens.jwks();
  return createRouter().openapi(jwks, (c) => {
    c.header("cache-control", "public, max-age=300");
    return c.json(body, 200);
  });
}
