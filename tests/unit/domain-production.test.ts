import { expect, test } from "bun:test";
import { ConfigError } from "../../src/config/config-error.ts";
import { loadConfig } from "../../src/config/load.ts";
import { validProductionEnv } from "../helpers/production-env.ts";

function problems(env: Record<string, string>): { key: string; problem: string }[] {
  try {
    loadConfig({ env: validProductionEnv(env), configDir: "/nonexistent" });
    return [];
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
}

test("Production: the gateway and the resolver are https, CNAME targets are host names", () => {
  expect(
    problems({
      TenantDomains__GatewayBaseUrl: "https://api.cloudflare.com/client/v4/zones/abc",
      TenantDomains__GatewayApiKey: "cf-token-value",
      TenantDomains__AllowedCnameTargets__0: "edge.plinth.example.",
    }),
  ).toEqual([]);
  const found = problems({
    TenantDomains__GatewayBaseUrl: "http://gateway.internal/zones/abc",
    TenantDomains__GatewayApiKey: "cf-token-value",
    TenantDomains__DnsJsonEndpoint: "http://resolver.internal/dns-query",
    TenantDomains__AllowedCnameTargets__0: "edge.plinth.example",
    TenantDomains__AllowedCnameTargets__1: "*.edge.example",
  });
  expect(found.map((p) => p.key).sort()).toEqual([
    "TenantDomains:AllowedCnameTargets:1",
    "TenantDomains:DnsJsonEndpoint",
    "TenantDomains:GatewayBaseUrl",
  ]);
  expect(JSON.stringify(found)).not.toContain("cf-token-value");
});
