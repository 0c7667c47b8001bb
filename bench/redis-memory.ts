/**
 * Redis memory per tenant and per active user (docs/scaling.md): the real app on a Redis of its own
 * prefix signs users of fresh tenants in (one wrong password first, then the right one), refreshes,
 * reads the tenant's features, then every key under the prefix is weighed with `MEMORY USAGE` and
 * grouped by what it belongs to: the tenant (its cached features, their generation), the client
 * address (rate-limit buckets, the address's password window), the account (its windows).
 *
 *   bun run bench:redis-memory [--tenants 20] [--users 5] [--redis redis://127.0.0.1:6379]
 *
 * Needs PostgreSQL on 127.0.0.1:5432 and the Redis given (a scratch database and prefix, removed after).
 */
import { parseArgs } from "node:util";
import { Redis } from "ioredis";
import { createTestApp, testConfig } from "../tests/helpers/app.ts";
import { createTestDatabase } from "../tests/helpers/database.ts";
import { bearer, createTenant, createUser, json, login } from "../tests/helpers/identity.ts";

const { values } = parseArgs({
  options: {
    tenants: { type: "string", default: "20" },
    users: { type: "string", default: "5" },
    redis: { type: "string", default: "redis://127.0.0.1:6379" },
  },
});
const TENANTS = Number(values.tenants);
const USERS = Number(values.users);
const prefix = `plinth:bench-memory-${process.pid}:`;

const t = await createTestDatabase();
const raw = new Redis(values.redis);
try {
  const app = await createTestApp({
    database: t.database,
    cachePrefix: prefix,
    // the rate limits' defaults (600 and 30 a minute): a bucket lives until it is full again
    config: testConfig({ cacheUrl: values.redis }),
  });
  await app.deps.cache?.waitReady(5_000);
  let address = 0;
  for (let i = 0; i < TENANTS; i++) {
    const tenant = await createTenant(t.database.db);
    for (let u = 0; u < USERS; u++) {
      const user = await createUser(t.database.db, tenant.id);
      const peer = `10.77.${(address >> 8) & 255}.${address++ & 255}`;
      await login(app, { email: user.email, tenant: tenant.code, password: "wrong-password-1" }, { peer });
      const signedIn = await login(app, { email: user.email, tenant: tenant.code }, { peer });
      if (signedIn.status !== 200) throw new Error(`login failed: ${signedIn.status}`);
      const tokens = (await signedIn.json()) as { accessToken: string; refreshToken: string };
      await app.request("/api/auth/refresh", json({ refreshToken: tokens.refreshToken }), peer);
      await app.request("/api/tenant/features", bearer(tokens.accessToken), peer);
    }
  }
  await app.close();

  const groups = new Map<string, { keys: number; bytes: number }>();
  let cursor = "0";
  do {
    const [next, keys] = await raw.scan(cursor, "MATCH", `${prefix}*`, "COUNT", 1000);
    cursor = next;
    for (const key of keys) {
      const bytes = Number(await raw.memory("USAGE", key, "SAMPLES", 0));
      const rest = key.slice(prefix.length);
      const group = rest.startsWith("tenant-features:")
        ? "tenant: cached features + generation"
        : rest.startsWith("usage:")
          ? "tenant: usage counters"
          : rest.startsWith("rl:")
            ? `client address: rate-limit bucket (${rest.split(":")[1]})`
            : rest.startsWith("win:")
              ? `${rest.includes(":ip:") ? "client address" : "account"}: ${rest.split(":").slice(1, 3).join(" ")} window`
              : `other (${rest.split(":")[0]})`;
      const entry = groups.get(group) ?? { keys: 0, bytes: 0 };
      entry.keys++;
      entry.bytes += bytes;
      groups.set(group, entry);
    }
  } while (cursor !== "0");

  const users = TENANTS * USERS;
  console.log(`\n${TENANTS} tenants × ${USERS} users, ${new Date().toISOString()}\n`);
  console.log("| keys of | keys | bytes (MEMORY USAGE) | per tenant | per active user |");
  console.log("| --- | ---: | ---: | ---: | ---: |");
  for (const [group, { keys, bytes }] of [...groups].sort()) {
    const perTenant = group.startsWith("tenant") ? Math.round(bytes / TENANTS) : "";
    const perUser = group.startsWith("tenant") ? "" : Math.round(bytes / users);
    console.log(`| ${group} | ${keys} | ${bytes} | ${perTenant} | ${perUser} |`);
  }
} finally {
  let cursor = "0";
  do {
    const [next, keys] = await raw.scan(cursor, "MATCH", `${prefix}*`, "COUNT", 1000);
    cursor = next;
    if (keys.length > 0) await raw.del(...keys);
  } while (cursor !== "0");
  raw.disconnect();
  await t.drop();
}
