/**
 * One tree's server for `bench/ab-trees.ts`: copied into a checkout's bench/ (any commit from
 * 50db25d on has `benchDeps`, `createPlatformAdmin` and `bunServeOptions`), it serves that tree's
 * app as server.ts does, on a fresh bench database, signs a platform administrator in and prints
 * `READY <port> <access token>`; SIGTERM stops it and drops the database. With `AB_SIGN_IN=owner` it
 * signs in a tenant's owner instead (a tenant of twenty users: `--path /api/tenant/users?limit=20`),
 * whose plan's request rate is raised out of the way and monthly api_calls unlimited (an override). `AB_SETTINGS` (JSON,
 * `Section__Key` names) adds settings (bench/ab-trees.ts passes a tree's `::Key=Value,…` suffix).
 */
import postgres from "postgres";
import { createApp } from "../src/app.ts";
import { bunServeOptions } from "../src/http/bun-serve.ts";
import { createPlatformAdmin, createTenant, createUser, PASSWORD } from "../tests/helpers/identity.ts";
import { benchDeps } from "./plinth-process.ts";

const { deps, database } = await benchDeps("ab", JSON.parse(process.env.AB_SETTINGS ?? "{}"));
const admin = await createPlatformAdmin(deps.database.db);
let signIn: Record<string, string> = { email: admin.email };
if (process.env.AB_SIGN_IN === "owner") {
  const tenant = await createTenant(deps.database.db);
  const owner = await createUser(deps.database.db, tenant.id, { role: "owner" });
  for (let i = 0; i < 19; i++) await createUser(deps.database.db, tenant.id);
  signIn = { email: owner.email, tenant: tenant.code };
  const raw = postgres(database.url, { onnotice: () => {} });
  // a finite rate (the limiter then works as it does for every tenant), unlimited calls a month
  await raw`insert into tenant_feature_overrides (tenant_id, feature_key, enabled, "limit")
    select ${tenant.id}, key, true, case key when 'api_calls' then null else 1000000000 end
    from features where key in ('rate_limit_per_minute', 'api_calls')`;
  await raw.end();
}
const sql = postgres(database.url, { onnotice: () => {} });
await sql`update users set must_change_password = false`;
await sql.end();
const server = Bun.serve({ port: 0, ...bunServeOptions(createApp(deps), deps) });
const login = await fetch(`http://127.0.0.1:${server.port}/api/auth/login`, {
  method: "POST",
  headers: { "content-type": "application/json" },
  body: JSON.stringify({ ...signIn, password: PASSWORD }),
});
if (login.status !== 200) throw new Error(`sign-in answered ${login.status}`);
const { accessToken } = (await login.json()) as { accessToken: string };
console.log(`READY ${server.port} ${accessToken}`);
process.on("SIGTERM", async () => {
  server.stop(true);
  await database.drop().catch(() => {});
  process.exit(0);
});
