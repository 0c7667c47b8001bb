/**
 * A Redis Cluster cache URL: `redis://[user:password@]host1:port1,host2:port2,host3:port3?cluster=true`
 * (`rediss://` for TLS). The hosts are seeds: the client learns the whole cluster from any of them.
 */
export interface RedisClusterUrl {
  nodes: { host: string; port: number }[];
  username?: string;
  password?: string;
  tls: boolean;
}

/** The cluster a `redis://`/`rediss://` URL names, or null when it is not a cluster URL (no `cluster=true`). */
export function parseRedisClusterUrl(url: string): RedisClusterUrl | null {
  const match = /^(rediss?):\/\/(?:([^@/?#]*)@)?([^/?#]+)(?:\/[^?#]*)?(?:\?([^#]*))?$/i.exec(url.trim());
  if (!match) return null;
  const [, scheme = "", userinfo, hostList = "", query = ""] = match;
  const params = new URLSearchParams(query);
  if (!/^(true|1|yes)$/i.test(params.get("cluster") ?? "")) return null;
  const nodes = hostList.split(",").map((entry) => {
    const hostPort = /^(\[[^\]]+\]|[^:]+)(?::(\d+))?$/.exec(entry.trim());
    if (!hostPort?.[1]) throw new Error("a Redis Cluster URL lists host:port pairs separated by commas");
    const port = hostPort[2] ? Number(hostPort[2]) : 6379;
    if (!(port > 0 && port < 65_536)) throw new Error("a Redis Cluster node's port must be 1-65535");
    return { host: hostPort[1].replace(/^\[|\]$/g, ""), port };
  });
  const out: RedisClusterUrl = { nodes, tls: scheme.toLowerCase() === "rediss" };
  if (userinfo) {
    const colon = userinfo.indexOf(":");
    const user = decodeURIComponent(colon < 0 ? userinfo : userinfo.slice(0, colon));
    const password = colon < 0 ? "" : decodeURIComponent(userinfo.slice(colon + 1));
    if (colon < 0) out.password = user;
    else {
      if (user) out.username = user;
      if (password) out.password = password;
    }
  }
  return out;
}
