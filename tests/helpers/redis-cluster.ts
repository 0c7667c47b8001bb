import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Subprocess } from "bun";
import { tracked } from "./children.ts";

/**
 * A Redis Cluster of its own (three masters, one replica each) on six consecutive ports, for a test that kills a master: the shared cluster of scripts/scaled-services.sh is
 * left alone. Node timeout 2,000 ms, so a replica takes over a dead master within a few seconds.
 * Ports stay below 55535: each node also listens on port + 10000 (the cluster bus).
 */
export interface OwnRedisCluster {
  url: string;
  ports: number[];
  /** Ports of the nodes that are masters now (asked of a live node). */
  masters(): Promise<number[]>;
  /** Kills a node with SIGKILL (a crash: no goodbye to the cluster). */
  kill(port: number): Promise<void>;
  /** Starts a killed node again with its nodes.conf: it rejoins, as a replica of its successor. */
  restart(port: number): Promise<void>;
  /** Whether every live node reports `cluster_state:ok`. */
  healthy(): Promise<boolean>;
  stop(): Promise<void>;
}

async function cli(port: number, ...args: string[]): Promise<string> {
  const proc = tracked(
    Bun.spawn(["redis-cli", "-h", "127.0.0.1", "-p", String(port), ...args], {
      stdout: "pipe",
      stderr: "pipe",
    }),
  );
  const out = await new Response(proc.stdout).text();
  await proc.exited;
  return out;
}

async function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}

/** Six consecutive free ports whose cluster-bus ports (+10000) are free too, below 55535. */
export async function freeClusterPorts(): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const base = 20_000 + Math.floor(Math.random() * 20_000);
    const ports = Array.from({ length: 6 }, (_, i) => base + i);
    if ((await Promise.all([...ports, ...ports.map((p) => p + 10_000)].map(portFree))).every(Boolean))
      return base;
  }
  throw new Error("no six free consecutive ports for a test cluster");
}

/** A cluster on six free ports (see freeClusterPorts), or from `basePort` when given. */
export async function ownRedisCluster(basePort?: number): Promise<OwnRedisCluster> {
  basePort ??= await freeClusterPorts();
  const dir = mkdtempSync(join(tmpdir(), "plinth-cluster-"));
  const ports = Array.from({ length: 6 }, (_, i) => basePort + i);
  const nodes = new Map<number, Subprocess>();
  const start = async (port: number) => {
    nodes.set(
      port,
      tracked(
        Bun.spawn(
          [
            "redis-server",
            "--port",
            String(port),
            "--bind",
            "127.0.0.1",
            "--dir",
            dir,
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            `nodes-${port}.conf`,
            "--cluster-node-timeout",
            "2000",
            "--save",
            "",
            "--appendonly",
            "no",
          ],
          { stdout: "ignore", stderr: "ignore" },
        ),
      ),
    );
    for (let i = 0; i < 100; i++) {
      if ((await cli(port, "ping")).includes("PONG")) return;
      await Bun.sleep(50);
    }
    throw new Error(`redis-server on port ${port} did not start`);
  };
  const live = () => ports.filter((port) => nodes.has(port));
  const cluster: OwnRedisCluster = {
    url: `redis://${ports
      .slice(0, 3)
      .map((p) => `127.0.0.1:${p}`)
      .join(",")}?cluster=true`,
    ports,
    masters: async () => {
      const [port] = live();
      const out = await cli(port ?? basePort, "cluster", "nodes");
      return out
        .split("\n")
        .filter((line) => {
          const flags = (line.split(" ")[2] ?? "").split(",");
          return flags.includes("master") && !flags.some((flag) => flag.startsWith("fail"));
        })
        .map((line) => Number(/:(\d+)@/.exec(line)?.[1]))
        .filter((port) => nodes.has(port));
    },
    kill: async (port) => {
      const node = nodes.get(port);
      if (!node) return;
      node.kill("SIGKILL");
      await node.exited;
      nodes.delete(port);
    },
    restart: (port) => start(port),
    healthy: async () => {
      for (const port of live())
        if (!(await cli(port, "cluster", "info")).includes("cluster_state:ok")) return false;
      return true;
    },
    stop: async () => {
      for (const port of live()) await cluster.kill(port);
      rmSync(dir, { recursive: true, force: true });
    },
  };
  try {
    await Promise.all(ports.map(start));
    const create = tracked(
      Bun.spawn(
        [
          "redis-cli",
          "--cluster",
          "create",
          ...ports.map((p) => `127.0.0.1:${p}`),
          "--cluster-replicas",
          "1",
          "--cluster-yes",
        ],
        { stdout: "ignore", stderr: "pipe" },
      ),
    );
    if ((await create.exited) !== 0)
      throw new Error(`redis-cli --cluster create failed: ${await new Response(create.stderr).text()}`);
    for (let i = 0; i < 200 && !(await cluster.healthy()); i++) await Bun.sleep(50);
    if (!(await cluster.healthy())) throw new Error("the test cluster did not become ok");
    // every replica must have synced before a failover can promote it
    for (let i = 0; i < 200; i++) {
      const infos = await Promise.all(ports.map((p) => cli(p, "info", "replication")));
      if (infos.filter((info) => /master_link_status:up/.test(info)).length === 3) break;
      await Bun.sleep(50);
    }
  } catch (error) {
    await cluster.stop();
    throw error;
  }
  return cluster;
}
