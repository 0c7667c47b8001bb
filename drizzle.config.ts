import { defineConfig } from "drizzle-kit";

// Only `generate` is used (through scripts/db-generate.ts and scripts/db-check.ts): it diffs the
// schema against drizzle/meta and needs no database. Migrations are applied by src/migrate.ts.
export default defineConfig({
  dialect: "postgresql",
  // every file of the folder: a new area's table file is read without an entry in index.ts
  schema: "./src/db/schema/*.ts",
  out: "./drizzle",
  casing: "snake_case",
});
