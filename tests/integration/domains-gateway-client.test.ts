import { afterAll, beforeAll, beforeEach, describe, expect, test } from "bun:test";
import { createGatewayClient, GatewayError } from "../../src/custom-domains/gateway.ts";
import { type GatewayServer, startGatewayServer } from "../fixtures/gateway-server.ts";
import { uniqueHost } from "../helpers/domains.ts";

let gateway: GatewayServer;
beforeAll(() => {
  gateway = startGatewayServer();
});
afterAll(() => gateway.stop());
beforeEach(() => {
  gateway.failNext = 0;
  gateway.failAll = false;
  gateway.failStatus = 500;
  gateway.delayMs = 0;
});

const client = (overrides: { apiKey?: string; timeoutMs?: number; retries?: number } = {}) =>
  createGatewayClient({
    baseUrl: `${gateway.baseUrl}/`,
    apiKey: overrides.apiKey ?? gateway.apiKey,
    timeoutMs: overrides.timeoutMs ?? 2_000,
    retries: overrides.retries ?? 2,
    retryDelayMs: 5,
  });

describe("Cloudflare custom-hostnames client", () => {
  test("only canonical hostnames reach the gateway (the one hostname parser)", async () => {
    const start = gateway.requests.length;
    for (const name of ["APP.example.com", "app.example.com:443", "127.0.0.1.nip.io", "ａｐｐ.example.com"]) {
      const error = await client()
        .ensure(name)
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(GatewayError);
      expect(await client().findByHostname(name)).toBeNull();
    }
    expect(gateway.requests.length).toBe(start);
  });

  test("ensure creates once with ssl { method: http, type: dv }; a second ensure finds it", async () => {
    const hostname = uniqueHost("gw");
    const first = await client().ensure(hostname);
    expect(first).toMatchObject({ hostname, status: "pending", sslStatus: "pending_validation" });
    const creates = gateway.creates;
    expect((await client().ensure(hostname)).id).toBe(first.id);
    expect(gateway.creates).toBe(creates);
    expect(await client().get(first.id)).toEqual(first);
    expect(await client().get("no-such-id")).toBeNull();
  });

  test("429 and 5xx are retried a bounded number of times; other 4xx are not", async () => {
    const start = gateway.requests.length;
    gateway.failStatus = 429;
    gateway.failNext = 2;
    expect(await client().findByHostname(uniqueHost())).toBeNull();
    expect(gateway.requests.length - start).toBe(3);

    const again = gateway.requests.length;
    gateway.failStatus = 503;
    gateway.failAll = true;
    const error = await client({ retries: 1 })
      .findByHostname(uniqueHost())
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(GatewayError);
    expect((error as GatewayError).status).toBe(503);
    expect(gateway.requests.length - again).toBe(2);

    gateway.failAll = false;
    const refusedAt = gateway.requests.length;
    const refused = await client({ apiKey: "wrong-key-value" })
      .findByHostname(uniqueHost())
      .catch((e: unknown) => e);
    expect((refused as GatewayError).message).toBe("gateway answered HTTP 403: 10000 Authentication error");
    expect((refused as GatewayError).message).not.toContain("wrong-key-value");
    expect(gateway.requests.length - refusedAt).toBe(1);
  });

  test("a slow gateway times out, and the timeout is retried", async () => {
    gateway.delayMs = 300;
    const start = gateway.requests.length;
    const error = await client({ timeoutMs: 100, retries: 1 })
      .get("x")
      .catch((e: unknown) => e);
    expect((error as GatewayError).message).toBe("gateway timed out after 100 ms");
    expect((error as GatewayError).retryable).toBe(true);
    expect(gateway.requests.length - start).toBe(2);
  });

  test("every request carries the Bearer key", async () => {
    const start = gateway.requests.length;
    await client().ensure(uniqueHost());
    const sent = gateway.requests.slice(start);
    expect(sent.length).toBeGreaterThan(0);
    for (const r of sent) expect(r.authorization).toBe(`Bearer ${gateway.apiKey}`);
  });

  test("remove by id, by hostname, and by a stale id (falls back to the hostname)", async () => {
    const a = await client().ensure(uniqueHost("rm"));
    expect(await client().remove({ id: a.id, hostname: a.hostname })).toBe(true);
    expect(gateway.byHostname(a.hostname)).toBeUndefined();
    expect(await client().remove({ id: a.id, hostname: a.hostname })).toBe(false);

    const b = await client().ensure(uniqueHost("rm"));
    expect(await client().remove({ hostname: b.hostname })).toBe(true);
    expect(gateway.byHostname(b.hostname)).toBeUndefined();

    const c = await client().ensure(uniqueHost("rm"));
    expect(await client().remove({ id: "stale-id", hostname: c.hostname })).toBe(true);
    expect(gateway.byHostname(c.hostname)).toBeUndefined();
  });
});
