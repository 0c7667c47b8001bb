import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { renderConfigReference } from "../../src/config/reference.ts";
import { secretKeys } from "../../src/config/tree.ts";

test("docs/configuration.md matches the schema (run `bun run docs:config` after changing it)", () => {
  const committed = readFileSync(resolve(import.meta.dir, "../../docs/configuration.md"), "utf8");
  expect(committed).toBe(renderConfigReference());
});

test("the reference marks secret keys and lists the spec's keys", () => {
  const reference = renderConfigReference();
  for (const key of [
    "BackgroundProcessing:JobPollSeconds",
    "TenantDomains:GatewayApiKey",
    "Security:Jwt:VerificationKeys:N:PublicKey",
  ]) {
    expect(reference).toContain(`\`${key}\``);
  }
  expect(secretKeys).toContain("Security:TenantSecrets:MasterKey");
  expect(reference).toMatch(/`Security:TenantSecrets:MasterKey` \| [^|]+ \| — \| yes \|/);
});
