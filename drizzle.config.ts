import { defineConfig } from "drizzle-kit";

// Only `generate` is used (through scripts/db-generate.ts and scripts/db-check.ts): it diffs the
// schema against drizzle/meta and needs no database. Migrations are applied by src/migrate.ts.
export default defineConfig({
  dialect: "postgresql",
  schema: "./src/db/schema/index.ts",
  out: "./drizzle",
  casing: "snake_case",
});
