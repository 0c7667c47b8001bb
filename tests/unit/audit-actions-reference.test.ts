import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { AUDIT_ACTIONS, renderAuditActions, withAuditActionTable } from "../../src/audit/actions.ts";

test("docs/audit.md's action table matches src/audit/actions.ts (run `bun run docs:audit` after changing it)", () => {
  const committed = readFileSync(resolve(import.meta.dir, "../../docs/audit.md"), "utf8");
  expect(committed).toBe(withAuditActionTable(committed));
});

test("the action table lists every action the log records", () => {
  const table = renderAuditActions();
  for (const action of AUDIT_ACTIONS) expect(table).toContain(`| \`${action}\``);
  expect(table).toContain("| `auth.sign_in` (failure)");
  expect(table).toContain("| `authorization.refused` (denied)");
});
