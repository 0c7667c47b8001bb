import { eq } from "drizzle-orm";
import type { Db } from "../../src/db/client.ts";
import { tenantDomains } from "../../src/db/schema/index.ts";
import type { DohServer } from "../fixtures/doh-server.ts";
import type { GatewayServer } from "../fixtures/gateway-server.ts";

export const EDGE_TARGET = "edge.plinth-test.example";
export const PLATFORM_HOST = "api.plinth-test.example";

/** `TenantDomains:*` settings (as config overrides) pointing at the fixture servers. */
export function domainSettings(
  doh: DohServer,
  gateway: GatewayServer,
  extra: Record<string, string> = {},
): Record<string, string> {
  return {
    "TenantDomains:DnsJsonEndpoint": doh.url,
    "TenantDomains:GatewayBaseUrl": gateway.baseUrl,
    "TenantDomains:GatewayApiKey": gateway.apiKey,
    "TenantDomains:AllowedCnameTargets:0": EDGE_TARGET,
    "TenantDomains:AllowedCnameTargets:1": "fallback.plinth-test.example",
    "TenantDomains:DnsTimeoutMs": "300",
    "TenantDomains:GatewayTimeoutMs": "1000",
    "Tenancy:Resolution:PlatformHost": PLATFORM_HOST,
    ...extra,
  };
}

/** Publishes the records a tenant is told to set (the TXT and the CNAME). */
export function publishRecords(
  doh: DohServer,
  domain: { hostname: string; verification: { name: string; value: string } },
) {
  doh.setTxt(domain.verification.name, domain.verification.value);
  doh.setCname(domain.hostname, EDGE_TARGET);
}

export async function domainRow(db: Db, id: string) {
  const [row] = await db.select().from(tenantDomains).where(eq(tenantDomains.id, id));
  if (!row) throw new Error(`no domain ${id}`);
  return row;
}

/**
 * A hostname no other test uses (10 hex digits: 8 could read as a wildcard-DNS address, which the
 * hostname parser refuses when it is private).
 */
export const uniqueHost = (label = "app") =>
  `${label}-${crypto.randomUUID().replaceAll("-", "").slice(0, 10)}.customer-test.example`;
