/**
 * The OpenAPI document, built from `createApp` without a running server or database:
 * `bun scripts/openapi.ts write <file>` writes it (JSON), for the linter and the type generator.
 */
import { writeFileSync } from "node:fs";
import { createApp } from "../src/app.ts";
import { loadConfig } from "../src/config/load.ts";
import { closeDeps, createDeps } from "../src/deps.ts";

export async function openApiDocument(): Promise<unknown> {
  // postgres.js connects on the first query; building the app runs none
  const config = loadConfig({
    env: { PLINTH_ENVIRONMENT: "Development", DATABASE_URL: "postgres://127.0.0.1:1/unused" },
    configDir: "/nonexistent",
  });
  const deps = await createDeps(config, { logWrite: () => {}, storage: null });
  try {
    const response = await createApp(deps).request("http://localhost/api/openapi.json");
    return await response.json();
  } finally {
    await closeDeps(deps);
  }
}

if (import.meta.main) {
  const [command, file] = process.argv.slice(2);
  if (command !== "write" || !file) {
    console.error("usage: bun scripts/openapi.ts write <file.json>");
    process.exit(2);
  }
  writeFileSync(file, `${JSON.stringify(await openApiDocument(), null, 2)}\n`);
}
