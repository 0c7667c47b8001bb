import { Cluster, Redis } from "ioredis";
import { parseRedisClusterUrl } from "../../src/cache/cluster-url.ts";
import { type Cache, createCache } from "../../src/cache/index.ts";
import { createRedactor } from "../../src/redact.ts";
import { createLogger, type Logger } from "../../src/telemetry/logger.ts";

/** The single Redis node (the Upstash bridge always stands on it: Upstash is one node too). */
export const SINGLE_REDIS_URL = process.env.PLINTH_TEST_REDIS_URL ?? "redis://127.0.0.1:6379";

/** The Redis Cluster of the scaled topology (scripts/scaled-services.sh). */
export const REDIS_CLUSTER_URL =
  process.env.PLINTH_TEST_REDIS_CLUSTER_URL ??
  "redis://127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002?cluster=true";

/**
 * The shared Redis every test talks to; tests isolate themselves by key prefix, never flush. In the
 * scaled topology (PLINTH_TEST_TOPOLOGY=scaled) it is the Redis Cluster.
 */
export const REDIS_URL = process.env.PLINTH_TEST_TOPOLOGY === "scaled" ? REDIS_CLUSTER_URL : SINGLE_REDIS_URL;

export const silentLogger: Logger = createLogger({
  level: "error",
  redactor: createRedactor([]),
  write: () => {},
});

/** A prefix no other test file or process uses. */
export function uniquePrefix(label: string): string {
  return `plinth:test-${label}-${process.pid}-${crypto.randomUUID().slice(0, 8)}:`;
}

/** A Redis cache under its own prefix, connected before it is handed out. */
export async function openRedisCache(prefix: string, url = REDIS_URL): Promise<Cache> {
  const cache = createCache(url, { environment: "Development", logger: silentLogger, prefix });
  if (!(await cache.waitReady(5_000))) throw new Error(`no Redis at ${url}`);
  return cache;
}

/**
 * A raw client to look at keys as they are stored; `cleanup` deletes everything under a prefix.
 * On a cluster URL (`?cluster=true`) it is a cluster client and scans every master.
 */
export function rawRedis(url = REDIS_URL) {
  const cluster = parseRedisClusterUrl(url);
  const client: Redis | Cluster = cluster
    ? new Cluster(cluster.nodes)
    : new Redis(url, { lazyConnect: false });
  const scanAll = async (pattern: string): Promise<string[]> => {
    const found: string[] = [];
    const nodes =
      client instanceof Cluster
        ? await new Promise<Redis[]>((resolve) => {
            if (client.status === "ready") resolve(client.nodes("master"));
            else client.once("ready", () => resolve(client.nodes("master")));
          })
        : [client];
    for (const node of nodes) {
      let cursor = "0";
      do {
        const [next, batch] = await node.scan(cursor, "MATCH", pattern, "COUNT", 500);
        cursor = next;
        found.push(...batch);
      } while (cursor !== "0");
    }
    return found;
  };
  return {
    client,
    keys: async (prefix: string): Promise<string[]> => (await scanAll(`${prefix}*`)).sort(),
    cleanup: async (prefix: string): Promise<void> => {
      const keys = await scanAll(`${prefix}*`);
      // on a cluster the keys of one DEL must share a slot: one key per DEL there
      if (client instanceof Cluster) await Promise.all(keys.map((key) => client.del(key)));
      else for (let i = 0; i < keys.length; i += 500) await client.del(...keys.slice(i, i + 500));
    },
    close: () => client.disconnect(),
  };
}
