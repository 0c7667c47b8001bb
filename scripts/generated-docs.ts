/**
 * The docs generated from the code, and their check:
 * - `bun scripts/generated-docs.ts roles` (`bun run docs:roles`): docs/roles.md from the access each
 *   route declares (`apiRoute(access, …)`, src/http/access.ts);
 * - `bun scripts/generated-docs.ts audit` (`bun run docs:audit`): the action table of docs/audit.md
 *   from src/audit/actions.ts and the areas' declarations (src/http/area-registry.ts);
 * - `bun scripts/generated-docs.ts check` (`bun run docs:check`, part of `bun run check`): exit 1
 *   when a route under /api/ declares no access, or when either doc, or docs/errors.md (`bun run
 *   docs:errors`, from src/http/problem-types.ts), is out of date.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { resolve } from "node:path";
import { withAuditActionTable } from "../src/audit/actions.ts";
import { declaredRoutes, undeclaredRoutes } from "../src/http/access.ts";
import { areaAuditActions } from "../src/http/area-registry.ts";
import { renderRolesReference } from "../src/http/roles-reference.ts";
import { renderErrorsReference } from "../src/http/routes/problems.ts";
import { withOfflineApp } from "./openapi.ts";

const ROLES = resolve(import.meta.dir, "../docs/roles.md");
const AUDIT = resolve(import.meta.dir, "../docs/audit.md");
const ERRORS = resolve(import.meta.dir, "../docs/errors.md");

const routes = () => withOfflineApp((app) => declaredRoutes(app.routes));
const auditDoc = () => withAuditActionTable(readFileSync(AUDIT, "utf8"), areaAuditActions());

async function check(): Promise<string[]> {
  const table = await routes();
  const problems = undeclaredRoutes(table).map(
    (route) => `${route} declares no access: give its apiRoute(…) one (src/http/access.ts)`,
  );
  if (problems.length > 0) return problems;
  if (readFileSync(ROLES, "utf8") !== renderRolesReference(table))
    problems.push("docs/roles.md is out of date: run `bun run docs:roles`");
  if (readFileSync(AUDIT, "utf8") !== auditDoc())
    problems.push("docs/audit.md's action table is out of date: run `bun run docs:audit`");
  if (readFileSync(ERRORS, "utf8") !== renderErrorsReference())
    problems.push("docs/errors.md is out of date: run `bun run docs:errors`");
  return problems;
}

const command = process.argv[2];
if (command === "roles") {
  writeFileSync(ROLES, renderRolesReference(await routes()));
  console.log(`wrote ${ROLES}`);
} else if (command === "audit") {
  writeFileSync(AUDIT, auditDoc());
  console.log(`wrote ${AUDIT}`);
} else if (command === "check") {
  const problems = await check();
  for (const problem of problems) console.error(problem);
  process.exit(problems.length > 0 ? 1 : 0);
} else {
  console.error("usage: bun scripts/generated-docs.ts roles | audit | check");
  process.exit(64);
}
