import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";

const root = resolve(import.meta.dir, "../..");

test("README's list of what Production requires names every key src/config/production.ts checks", () => {
  const readme = readFileSync(resolve(root, "README.md"), "utf8");
  const section = readme.slice(
    readme.indexOf("Production the API refuses to start"),
    readme.indexOf("## Container"),
  );
  const source = readFileSync(resolve(root, "src/config/production.ts"), "utf8");
  const keys = new Set(
    [...source.matchAll(/[`"]((?:[A-Z][A-Za-z]+)(?::[A-Z][A-Za-z]+)*)(?::\$\{i\}[^`"]*)?[`"]/g)]
      .map((m) => m[1] ?? "")
      .filter((key) =>
        /^(Security|Authentication|Tenancy|AllowedHosts|Cors|BrowserAuth|RateLimiting|TenantDomains|ConnectionStrings)/.test(
          key,
        ),
      ),
  );
  expect(keys.size).toBeGreaterThan(15);
  const missing = [...keys].filter((key) => {
    const parts = key.split(":");
    // named in full, or by its section and last segment (`Security:Jwt` `Issuer`)
    return (
      !section.includes(key) &&
      !(section.includes(parts.slice(0, -1).join(":")) && section.includes(`\`${parts.at(-1)}\``))
    );
  });
  // the cache is named by its variable in README
  expect(missing.filter((key) => !key.startsWith("ConnectionStrings:"))).toEqual([]);
  // the README does not claim CORS or browser-auth origins are required: production.ts does not
  expect(section).toMatch(/checked when set[\s\S]*Cors:Origins[\s\S]*BrowserAuth:AllowedOrigins/);
});
