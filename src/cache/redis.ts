import { Cluster, Redis } from "ioredis";
import { parseRedisClusterUrl } from "./cluster-url.ts";
// ioredis asks TracingChannel#hasSubscribers before tracing each command; Bun lacks the getter
import "../runtime/tracing-channel.ts";
import { withTimeout } from "../runtime/with-timeout.ts";
import {
  type AdapterSettings,
  type Cache,
  CacheUnavailableError,
  isNoScript,
  throttledWarn,
} from "./port.ts";
import { incrByScript } from "./scripts.ts";

/** How often a cluster client re-reads the slot map on its own (a failover also triggers it). */
const SLOTS_REFRESH_MS = 1_000;

/**
 * Redis over TCP (`redis://`, `rediss://`) through ioredis: one node, or a Redis Cluster
 * (`redis://h1:p1,h2:p2,h3:p3?cluster=true`). On a cluster, a script's keys and a multi-key command's
 * keys must share a slot: callers put one window's, limit's or entry's keys under one hash tag
 * (`{…}`), and `del` of several keys goes key by key.
 */
export function createRedisCache(url: string, settings: AdapterSettings): Cache {
  const { prefix } = settings;
  const cluster = parseRedisClusterUrl(url);
  // AbortOnConnectFail=false: never throw at start-up; reconnect forever with a capped delay, and
  // fail commands at once while disconnected (no offline queue) so callers can fail closed.
  const retryStrategy = (attempt: number) => Math.min(attempt * 200, 2_000);
  const common = {
    maxRetriesPerRequest: 1,
    connectTimeout: 2_000,
    commandTimeout: settings.commandTimeoutMs,
  };
  const client: Redis | Cluster = cluster
    ? new Cluster(cluster.nodes, {
        enableOfflineQueue: false,
        clusterRetryStrategy: retryStrategy,
        slotsRefreshInterval: SLOTS_REFRESH_MS,
        slotsRefreshTimeout: 1_000,
        // while a master fails over, a command is retried briefly on the new slot map, never queued long
        retryDelayOnFailover: 100,
        retryDelayOnClusterDown: 100,
        retryDelayOnTryAgain: 100,
        maxRedirections: 4,
        enableAutoPipelining: true,
        redisOptions: {
          ...common,
          ...(cluster.username ? { username: cluster.username } : {}),
          ...(cluster.password ? { password: cluster.password } : {}),
          ...(cluster.tls ? { tls: {} } : {}),
        },
      })
    : new Redis(url, {
        ...common,
        lazyConnect: false,
        enableOfflineQueue: false,
        retryStrategy,
        // commands issued in the same event-loop turn (one per concurrent request) go out in one write
        enableAutoPipelining: true,
      });
  client.on("error", throttledWarn(settings.logger, "cache connection error; reconnecting", settings.clock));
  if (client instanceof Cluster) {
    // a node that drops out is reported per node; the cluster client reroutes by itself
    client.on("node error", throttledWarn(settings.logger, "cache cluster node error", settings.clock));
  }

  const call = async <T>(operation: string, work: () => Promise<T>): Promise<T> => {
    try {
      return await work();
    } catch (error) {
      throw new CacheUnavailableError(operation, error);
    }
  };
  const k = (key: string) => prefix + key;

  const cache: Cache = {
    adapter: "redis",
    cluster: cluster !== null,
    prefix,
    ping: async (timeoutMs) => {
      if (!(client instanceof Cluster)) {
        await withTimeout(client.ping(), timeoutMs, "cache ping");
        return;
      }
      // Ready only while every slot has a master that answers: from a node's view of the cluster,
      // each master owning slots must be free of fail flags and answer this client's ping. Right
      // after a master dies (before the node timeout flags it) its ping fails; once flagged it
      // fails by its flags; after its replica took over it owns no slots and no longer counts.
      if (client.status !== "ready") throw new Error(`cache cluster is ${client.status}`);
      await withTimeout(clusterWhole(client), timeoutMs, "cache ping");
    },
    waitReady: async (timeoutMs) => {
      if (client.status === "ready") return true;
      return new Promise<boolean>((resolve) => {
        const done = (ok: boolean) => {
          clearTimeout(timer);
          client.off("ready", onReady);
          resolve(ok);
        };
        const onReady = () => done(true);
        const timer = setTimeout(() => done(false), timeoutMs);
        client.once("ready", onReady);
      });
    },
    get: (key) => call("get", () => client.get(k(key))),
    set: (key, value, ttlSeconds) =>
      call("set", async () => {
        if (ttlSeconds > 0) await client.set(k(key), value, "EX", ttlSeconds);
        else await client.set(k(key), value);
      }),
    del: (...keys) => {
      if (keys.length === 0) return Promise.resolve(0);
      if (!cluster) return call("del", () => client.del(...keys.map(k)));
      // keys of different slots cannot go in one DEL on a cluster
      return call("del", async () => {
        const counts = await Promise.all(keys.map((key) => client.del(k(key))));
        return counts.reduce((sum, n) => sum + n, 0);
      });
    },
    incrBy: async (key, by, ttlSeconds = 0) => Number(await cache.run(incrByScript, [key], [by, ttlSeconds])),
    run: (script, keys, args) =>
      call(script.name, async () => {
        const full = keys.map(k);
        try {
          return await client.evalsha(script.sha1, full.length, ...full, ...args);
        } catch (error) {
          if (!isNoScript(error)) throw error;
          return await client.eval(script.source, full.length, ...full, ...args);
        }
      }),
    close: async () => {
      client.disconnect(false);
    },
  };
  return cache;
}

/** Throws unless the cluster is ok and every master owning slots is flagged healthy and answers. */
async function clusterWhole(client: Cluster): Promise<void> {
  const [info, nodes] = await Promise.all([client.cluster("INFO"), client.cluster("NODES")]);
  if (!/cluster_state:ok/.test(String(info))) throw new Error("cache cluster state is not ok");
  const connected = client.nodes("master");
  const checks = String(nodes)
    .split("\n")
    .map((line) => line.trim().split(" "))
    .filter((fields) => (fields[2] ?? "").split(",").includes("master") && fields.length > 8)
    .map(async (fields) => {
      const flags = (fields[2] ?? "").split(",");
      if (flags.some((flag) => flag.startsWith("fail"))) throw new Error("a cache cluster master failed");
      const address = (fields[1] ?? "").split("@")[0] ?? "";
      const node = connected.find((n) => `${n.options.host}:${n.options.port}` === address);
      if (!node) throw new Error("a cache cluster master is not connected");
      await node.ping();
    });
  await Promise.all(checks);
}
