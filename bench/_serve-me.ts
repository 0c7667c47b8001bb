// Copied into a tree's bench/ as _serve-me.ts: serves that tree's app as server.ts does, on a fresh
// bench database, with a signed-in platform administrator; prints "READY <port> <token>".
import postgres from "postgres";
import { createApp } from "../src/app.ts";
import { bunServeOptions } from "../src/http/bun-serve.ts";
import { createPlatformAdmin, PASSWORD } from "../tests/helpers/identity.ts";
import { benchDeps } from "./plinth-process.ts";

const { deps, database: t } = await benchDeps("ab");
const admin = await createPlatformAdmin(deps.database.db);
const s = postgres(t.url, { onnotice: () => {} });
await s`update users set must_change_password = false`;
await s.end();
const app = createApp(deps);
const server = Bun.serve({ port: 0, ...bunServeOptions(app, deps) });
const base = `http://127.0.0.1:${server.port}`;
const login = await fetch(`${base}/api/auth/login`, {
  method: "POST",
  headers: { "content-type": "application/json" },
  body: JSON.stringify({ email: admin.email, password: PASSWORD }),
});
if (login.status !== 200) throw new Error(`login ${login.status} ${await login.text()}`);
const { accessToken } = (await login.json()) as { accessToken: string };
console.log(`READY ${server.port} ${accessToken}`);
process.on("SIGTERM", async () => {
  server.stop(true);
  await t.drop().catch(() => {});
  process.exit(0);
});
