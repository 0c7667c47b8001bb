// `bun run db:generate [--name <name>]`: drizzle-kit diffs src/db/schema against drizzle/meta.
const args = process.argv.slice(2);
const proc = Bun.spawnSync(["bunx", "drizzle-kit", "generate", ...args], {
  stdout: "inherit",
  stderr: "inherit",
});
process.exit(proc.exitCode ?? 1);
