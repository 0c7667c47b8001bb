/**
 * The OpenAPI document, built from `createApp` without a running server or database:
 * - `bun scripts/openapi.ts write <file>` writes it (JSON);
 * - `bun scripts/openapi.ts lint` lints it with Redocly CLI's recommended rules (exit 1 on an error);
 * - `bun scripts/openapi.ts types [file]` generates its TypeScript types with openapi-typescript
 *   (default `examples/client/schema.d.ts`, the types `examples/client/main.ts` uses).
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { type App, createApp } from "../src/app.ts";
import { loadConfig } from "../src/config/load.ts";
import { closeDeps, createDeps } from "../src/deps.ts";

/** Runs `use` over the app as `createApp` builds it, without a running server or database. */
export async function withOfflineApp<T>(use: (app: App) => Promise<T> | T): Promise<T> {
  // postgres.js connects on the first query; building the app runs none
  const config = loadConfig({
    env: { PLINTH_ENVIRONMENT: "Development", DATABASE_URL: "postgres://127.0.0.1:1/unused" },
    configDir: "/nonexistent",
  });
  const deps = await createDeps(config, { logWrite: () => {}, storage: null });
  try {
    return await use(createApp(deps));
  } finally {
    await closeDeps(deps);
  }
}

export function openApiDocument(): Promise<unknown> {
  return withOfflineApp(async (app) => (await app.request("http://localhost/api/openapi.json")).json());
}

export const TYPES_FILE = "examples/client/schema.d.ts";

async function withDocumentFile<T>(run: (file: string) => Promise<T>): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), "plinth-openapi-"));
  const file = join(dir, "openapi.json");
  try {
    writeFileSync(file, JSON.stringify(await openApiDocument(), null, 2));
    return await run(file);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.main) {
  const [command, file] = process.argv.slice(2);
  if (command === "write" && file) {
    writeFileSync(file, `${JSON.stringify(await openApiDocument(), null, 2)}\n`);
  } else if (command === "lint") {
    const code = await withDocumentFile(async (doc) => {
      const lint = Bun.spawn(["npx", "redocly", "lint", "--extends", "recommended", doc], {
        stdout: "inherit",
        stderr: "inherit",
      });
      return await lint.exited;
    });
    process.exit(code);
  } else if (command === "types") {
    const out = file ?? TYPES_FILE;
    const before = existsSync(resolve(out)) ? readFileSync(resolve(out), "utf8") : undefined;
    await withDocumentFile(async (doc) => {
      // openapi-typescript needs the TypeScript 5 compiler API, which TypeScript 7 (the project's) has
      // not. npx runs it from the document's temporary directory: started in the project it would find
      // the project's openapi-typescript and, beside it, TypeScript 7 (ts.factory undefined).
      const generate = Bun.spawn(
        [
          "npx",
          "--yes",
          "-p",
          "typescript@5.9",
          "-p",
          "openapi-typescript@7.13.0",
          "openapi-typescript",
          doc,
          "--output",
          resolve(out),
        ],
        {
          cwd: dirname(doc),
          stdout: "inherit",
          stderr: "inherit",
        },
      );
      if ((await generate.exited) !== 0) process.exit(1);
    });
    // the committed client types follow the document: a stale file is rewritten and fails the check,
    // so a change to the document lands with its regenerated types
    if (file === undefined && before !== readFileSync(resolve(out), "utf8")) {
      console.error(
        `${out} was out of date with the document: regenerated it; commit it and run the check again`,
      );
      process.exit(1);
    }
  } else {
    console.error("usage: bun scripts/openapi.ts write <file.json> | lint | types [file.d.ts]");
    process.exit(2);
  }
}
