import { afterAll, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { type DestinationPolicy, sendDelivery, systemResolver } from "../../src/webhooks/destinations.ts";
import { makeTestCertificates } from "../helpers/certificates.ts";

const policy: DestinationPolicy = { httpsOnly: false, allowPrivate: true, resolve: systemResolver };
let releaseHang: () => void = () => {};
const hang = new Promise<void>((resolve) => {
  releaseHang = resolve;
});
let hits = 0;
const server = Bun.serve({
  port: 0,
  hostname: "127.0.0.1",
  development: false,
  fetch: async (request) => {
    hits++;
    const path = new URL(request.url).pathname;
    if (path === "/hang") {
      await hang;
      return new Response("late");
    }
    if (path === "/huge") {
      // far more than anyone should read: 64 MiB, streamed
      let sent = 0;
      const chunk = new Uint8Array(1024 * 1024);
      return new Response(
        new ReadableStream({
          pull(controller) {
            if (sent >= 64) return controller.close();
            sent++;
            controller.enqueue(chunk);
          },
        }),
        { status: 200 },
      );
    }
    return new Response("ok");
  },
});
afterAll(() => {
  releaseHang();
  server.stop(true);
});
const base = `http://127.0.0.1:${server.port}`;
const send = (url: string, over: Partial<Parameters<typeof sendDelivery>[0]> = {}) =>
  sendDelivery({ url, headers: {}, body: "{}", timeoutMs: 5_000, maxResponseBytes: 65_536, policy, ...over });

test("no answer within the time limit is a timeout, and the attempt ends there", async () => {
  const result = await send(`${base}/hang`, { timeoutMs: 300 });
  expect(result.errorClass).toBe("timeout");
  expect(result.statusCode).toBeNull();
  expect(result.durationMs).toBeGreaterThanOrEqual(290);
  expect(result.durationMs).toBeLessThan(4_000);
});

test("a huge answer is read up to the cap, then dropped", async () => {
  const result = await send(`${base}/huge`);
  expect(result).toMatchObject({ statusCode: 200, errorClass: null });
});

test("a closed port is a network error, not an exception", async () => {
  const closed = Bun.serve({ port: 0, fetch: () => new Response("") });
  const port = closed.port;
  closed.stop(true);
  const result = await send(`http://127.0.0.1:${port}/`);
  expect(result.errorClass).toBe("network");
});

test("without AllowPrivateDestinations a literal private address is refused before any connection", async () => {
  const before = hits;
  const strict = { ...policy, allowPrivate: false };
  for (const url of [
    `${base}/x`,
    `http://[::ffff:127.0.0.1]:${server.port}/x`,
    `http://localhost:${server.port}/x`,
  ]) {
    const result = await send(url, { policy: strict });
    expect({ url, errorClass: result.errorClass }).toEqual({ url, errorClass: "destination_refused" });
  }
  expect(hits).toBe(before);
});

test("https certificates are verified: a self-signed receiver is a tls failure, nothing accepted", async () => {
  const certs = makeTestCertificates("receiver.plinth.test");
  const cert = readFileSync(certs.certPath, "utf8");
  const key = readFileSync(certs.keyPath, "utf8");
  let reached = 0;
  const tls = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    development: false,
    tls: { cert, key },
    fetch: () => {
      reached++;
      return new Response("ok");
    },
  });
  try {
    const result = await send(`https://127.0.0.1:${tls.port}/x`);
    expect(result.errorClass).toBe("tls");
    expect(reached).toBe(0);
  } finally {
    tls.stop(true);
    certs.cleanup();
  }
});
