// `bun run db:check`: fails when src/db/schema has changes that no migration in drizzle/ holds
// (the spec's has-pending-model-changes). drizzle-kit generate is run against a scratch copy of
// drizzle/ so that nothing in the work tree changes. `--schema <file>` checks another schema entry
// point (the test proves the check fails on a table no migration holds).
import { cpSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative, resolve } from "node:path";
import { parseArgs } from "node:util";

const root = resolve(import.meta.dir, "..");
const { values } = parseArgs({
  options: { schema: { type: "string", default: "./src/db/schema/*.ts" } },
});
const scratch = mkdtempSync(join(tmpdir(), "plinth-db-check-"));
try {
  cpSync(join(root, "drizzle"), join(scratch, "drizzle"), { recursive: true });
  const before = readdirSync(join(scratch, "drizzle")).length;
  const configPath = join(scratch, "drizzle.config.ts");
  writeFileSync(
    configPath,
    `export default ${JSON.stringify({
      dialect: "postgresql",
      schema: values.schema,
      out: relative(root, join(scratch, "drizzle")),
      casing: "snake_case",
    })};\n`,
  );
  const proc = Bun.spawnSync(["bunx", "drizzle-kit", "generate", `--config=${configPath}`], {
    cwd: root,
    stdout: "pipe",
    stderr: "pipe",
  });
  const output = `${proc.stdout.toString()}${proc.stderr.toString()}`;
  const after = readdirSync(join(scratch, "drizzle")).length;
  if (proc.exitCode !== 0) {
    console.error(output);
    console.error("db:check: drizzle-kit failed");
    process.exit(1);
  }
  if (after !== before || !output.includes("No schema changes")) {
    console.error(output);
    console.error(
      "db:check: the schema has changes without a migration; run `bun run db:generate --name <what>`",
    );
    process.exit(1);
  }
  console.log("db:check: schema and migrations agree");
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
