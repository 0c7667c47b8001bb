import { afterAll, beforeAll, expect } from "bun:test";
import { type ApiProcess, startApi } from "./api-process.ts";
import { relaxedLimits, settingsEnv } from "./app.ts";
import { PASSWORD } from "./identity.ts";
import { rsaKeys } from "./production-env.ts";

/**
 * Two real API processes over one test database (`database.url`, read once it exists), signing with one key, started before the file's
 * tests and stopped after them: what the cross-process tests (a session ended on one process is
 * refused by the other) share.
 */
export function useApiPair(database: { readonly url: string }, keyId: string) {
  const servers: ApiProcess[] = [];
  const pair = { ports: [] as number[] };
  beforeAll(async () => {
    const keys = rsaKeys();
    for (let i = 0; i < 2; i++)
      servers.push(
        startApi({
          DATABASE_URL: database.url,
          BackgroundProcessing__Enabled: "false",
          Security__Jwt__CurrentKeyId: keyId,
          Security__Jwt__PrivateKey: keys.privateKeyPem,
          ...settingsEnv(relaxedLimits),
        }),
      );
    pair.ports = await Promise.all(servers.map((server) => server.listening(30_000)));
  }, 60_000);
  afterAll(async () => {
    await Promise.all(servers.map((server) => server.stop()));
  }, 30_000);

  const on = (port: number, path: string, init: RequestInit = {}) =>
    fetch(`http://127.0.0.1:${port}${path}`, init);

  /** A tenant user's access token, signed in on `port` with the factories' password. */
  async function signIn(port: number, email: string, tenant: string): Promise<string> {
    const response = await on(port, "/api/auth/login", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ email, password: PASSWORD, tenant }),
    });
    expect(response.status).toBe(200);
    return ((await response.json()) as { accessToken: string }).accessToken;
  }

  /** How long after `committed` each process first refuses `token` on /me (200 until then; 5 s at most). */
  async function refusedAfter(token: string, committed: number): Promise<number[]> {
    return Promise.all(
      pair.ports.map(async (port) => {
        for (;;) {
          const sent = performance.now();
          const response = await on(port, "/api/auth/me", { headers: { authorization: `Bearer ${token}` } });
          if (response.status === 401) return sent - committed;
          expect(response.status).toBe(200);
          if (sent - committed > 5_000) throw new Error(`port ${port} still accepts the session after 5 s`);
        }
      }),
    );
  }

  return { pair, on, signIn, refusedAfter };
}
