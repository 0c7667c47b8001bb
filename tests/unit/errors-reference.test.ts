import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { errorCodes } from "../../src/errors.ts";
import { renderErrorsReference } from "../../src/http/routes/problems.ts";

test("docs/errors.md matches src/http/problem-types.ts (run `bun run docs:errors` after changing it)", () => {
  const committed = readFileSync(resolve(import.meta.dir, "../../docs/errors.md"), "utf8");
  expect(committed).toBe(renderErrorsReference());
});

test("docs/errors.md lists every code with its status and its page", () => {
  const reference = renderErrorsReference();
  for (const code of errorCodes) expect(reference).toContain(`| [\`${code}\`](/api/problems/${code}) |`);
  expect(reference).toContain(
    "| [`password_change_required`](/api/problems/password_change_required) | 403 |",
  );
});
