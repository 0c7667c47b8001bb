import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { renderAuditActions, withAuditActionTable } from "../../src/audit/actions.ts";
import { areaAuditActions, auditActionNames } from "../../src/http/area-registry.ts";

const AREA_AUDIT_ACTIONS = areaAuditActions();
const AUDIT_ACTIONS = auditActionNames();

test("docs/audit.md's action table matches the declared actions (run `bun run docs:audit` after changing them)", () => {
  const committed = readFileSync(resolve(import.meta.dir, "../../docs/audit.md"), "utf8");
  expect(committed).toBe(withAuditActionTable(committed, AREA_AUDIT_ACTIONS));
});

test("the action table lists every action the log records, each once", () => {
  const table = renderAuditActions(AREA_AUDIT_ACTIONS);
  for (const action of AUDIT_ACTIONS) expect(table).toContain(`| \`${action}\``);
  expect(new Set(AUDIT_ACTIONS).size).toBe(AUDIT_ACTIONS.length);
  expect(table).toContain("| `auth.sign_in` (failure)");
  expect(table).toContain("| `authorization.refused` (denied)");
});
