import { createRoute, z } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { createReadinessCheck, type Probe } from "../../health/readiness.ts";
import { createRouter } from "../context.ts";

const HEALTH_JSON = "application/health+json";
/** A probe's answer is live: never stored by any cache. */
const PROBE_HEADERS = { "content-type": HEALTH_JSON, "cache-control": "no-store" };
/** Each dependency gets this long; readiness answers within it even when a dependency hangs. */
export const PROBE_TIMEOUT_MS = 1_000;

const checkResult = z.object({
  componentType: z.string(),
  status: z.enum(["pass", "fail"]),
  observedValue: z.number(),
  observedUnit: z.literal("ms"),
  time: z.string(),
  output: z.string().optional(),
});
const readinessBody = z
  .object({ status: z.enum(["pass", "fail"]), checks: z.record(z.string(), z.array(checkResult)) })
  .openapi("Readiness");

const liveness = createRoute({
  method: "get",
  path: "/api/health",
  tags: ["health"],
  summary: "Liveness: the process answers. Touches no dependency.",
  responses: {
    200: {
      description: "The process is alive.",
      content: { [HEALTH_JSON]: { schema: z.object({ status: z.literal("pass") }).openapi("Liveness") } },
    },
  },
});

const readiness = createRoute({
  method: "get",
  path: "/api/health/ready",
  tags: ["health"],
  summary: "Readiness: the database and the configured cache answer.",
  responses: {
    200: { description: "Every dependency passed.", content: { [HEALTH_JSON]: { schema: readinessBody } } },
    503: {
      description: "A dependency failed or timed out.",
      content: { [HEALTH_JSON]: { schema: readinessBody } },
    },
  },
});

export function healthRoutes(deps: Deps) {
  const probes: Probe[] = [
    { name: "database:responseTime", componentType: "datastore", run: (ms) => deps.database.ping(ms) },
  ];
  const cache = deps.cache;
  if (cache)
    probes.push({ name: "cache:responseTime", componentType: "datastore", run: (ms) => cache.ping(ms) });
  const check = createReadinessCheck(probes, { timeoutMs: PROBE_TIMEOUT_MS, clock: deps.clock });

  return createRouter()
    .openapi(liveness, (c) => c.json({ status: "pass" as const }, 200, PROBE_HEADERS))
    .openapi(readiness, async (c) => {
      const result = await check();
      return result.status === "pass"
        ? c.json(result, 200, PROBE_HEADERS)
        : c.json(result, 503, PROBE_HEADERS);
    });
}
