import { expect, test } from "bun:test";
import { formatMigrationStatus } from "../../src/migrate.ts";

test("migrate --status: columns line up whatever the tags' lengths and states", () => {
  const text = formatMigrationStatus([
    {
      tag: "0000_baseline",
      applied: true,
      appliedAt: new Date("2026-01-02T03:04:05Z"),
      hasDown: false,
      changed: false,
    },
    {
      tag: "0001_remove_message_broker",
      applied: true,
      appliedAt: new Date("2026-01-02T03:04:06Z"),
      hasDown: true,
      changed: true,
    },
    {
      tag: "0004_tenant_secrets_providers_data_protection",
      applied: false,
      appliedAt: null,
      hasDown: false,
      changed: false,
    },
  ]);
  const lines = text.trimEnd().split("\n");
  expect(lines).toHaveLength(4);
  // every column starts at the same offset on every line
  for (const [header, rows] of [
    ["STATE", lines.slice(1)],
    ["APPLIED AT", lines.slice(1)],
    ["NOTES", lines.slice(2, 3)],
  ] as const) {
    const column = lines[0]?.indexOf(header) ?? -1;
    expect(column).toBeGreaterThan(0);
    for (const line of rows) {
      expect(line[column - 1]).toBe(" ");
      expect(line[column]).not.toBe(" ");
    }
  }
  expect(lines[2]).toContain("has Down step, FILE CHANGED SINCE APPLIED");
  expect(lines[3]).toMatch(/^0004_tenant_secrets_providers_data_protection {2}pending {2}- *$/);
});
