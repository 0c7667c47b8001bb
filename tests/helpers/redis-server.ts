import { createServer } from "node:net";
import { Redis } from "ioredis";
import { tracked } from "./children.ts";

/**
 * Its own redis-server on a random port, so a test can stop and restart it (an outage). The test
 * harness stops it when the file ends, whether or not the file calls `stop()`.
 */
export interface OwnRedis {
  port: number;
  url: string;
  /** Starts it again after `stop()`; while it runs, does nothing. */
  start(): Promise<void>;
  stop(): Promise<void>;
}

/** A port nothing listens on now (the OS picks it), for a process a test starts. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

export async function ownRedisServer(): Promise<OwnRedis> {
  const port = await freePort();
  const url = `redis://127.0.0.1:${port}`;
  let child: ReturnType<typeof Bun.spawn> | undefined;
  const own: OwnRedis = {
    port,
    url,
    start: async () => {
      // a second server on the same port would fail to bind, and the first would be lost to stop()
      if (child && child.exitCode === null && child.signalCode === null) return;
      child = tracked(
        Bun.spawn(
          ["redis-server", "--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
          { stdout: "ignore", stderr: "ignore" },
        ),
      );
      const probe = new Redis(url, { lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0 });
      for (let i = 0; i < 100; i++) {
        try {
          await probe.connect();
          await probe.ping();
          probe.disconnect();
          return;
        } catch {
          probe.disconnect();
          await Bun.sleep(20);
        }
      }
      throw new Error(`redis-server on port ${port} did not start`);
    },
    stop: async () => {
      if (!child) return;
      child.kill("SIGKILL");
      await child.exited;
      child = undefined;
    },
  };
  await own.start();
  return own;
}
