import { isIP } from "node:net";
import { parseRedisClusterUrl } from "../cache/cluster-url.ts";
import { CertificateError, loadCertificate } from "../security/certificates.ts";
import { parseJwtKeys } from "../security/jwt-keys.ts";
import { parseTenantSecretKeys } from "../security/tenant-secrets.ts";
import type { ConfigProblem } from "./config-error.ts";
import type { AppConfig } from "./load.ts";
import type { Settings } from "./schema.ts";

const HOST =
  /^(?=.{1,253}$)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/i;

export function isHostName(value: string): boolean {
  return HOST.test(value);
}

/** An origin is `scheme://host[:port]`, nothing more. */
export function isHttpOrigin(value: string): boolean {
  try {
    const url = new URL(value);
    return (url.protocol === "http:" || url.protocol === "https:") && url.origin === value.replace(/\/$/, "");
  } catch {
    return false;
  }
}

export function isIpOrCidr(value: string): boolean {
  const [address = "", bits, ...rest] = value.split("/");
  const family = isIP(address);
  if (family === 0 || rest.length > 0) return false;
  if (bits === undefined) return true;
  if (!/^\d+$/.test(bits)) return false;
  return Number(bits) <= (family === 4 ? 32 : 128);
}

/** The cache URL selects an adapter; Upstash over plain http:// is for local bridges, never Production. */
function checkCacheUrl(cache: NonNullable<AppConfig["cache"]>): ConfigProblem[] {
  const key = cache.source;
  try {
    if (parseRedisClusterUrl(cache.url)) return [];
  } catch (error) {
    return [{ key, problem: (error as Error).message }];
  }
  let url: URL;
  try {
    url = new URL(cache.url);
  } catch {
    return [{ key, problem: "must be a redis://, rediss:// or https:// URL" }];
  }
  if (url.protocol === "redis:" || url.protocol === "rediss:") return [];
  if (url.protocol !== "https:") return [{ key, problem: "must be a redis://, rediss:// or https:// URL" }];
  if (!url.password && !cache.token)
    return [
      { key: "ConnectionStrings:CacheToken", problem: "is required (or CACHE_TOKEN) for an https:// cache" },
    ];
  return [];
}

/** The data-protection certificates that are set load with their passwords. */
function checkCertificates(dp: Settings["Security"]["DataProtection"]): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  const certificates = dp.CertificatePath
    ? [
        {
          key: "Security:DataProtection:CertificatePath",
          path: dp.CertificatePath,
          password: dp.CertificatePassword,
        },
      ]
    : [];
  dp.PreviousCertificates.forEach((previous, i) => {
    const key = `Security:DataProtection:PreviousCertificates:${i}:Path`;
    certificates.push({ key, path: previous.Path, password: previous.Password });
  });
  for (const { key, path, password } of certificates) {
    try {
      loadCertificate(path, password);
    } catch (error) {
      const problem = error instanceof CertificateError ? error.message : "cannot be loaded";
      problems.push({ key, problem });
    }
  }
  return problems;
}

/** Explicit CORS origins, methods and headers: no wildcard anywhere. */
function checkCors(cors: Settings["Cors"]): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  cors.Origins.forEach((origin, i) => {
    if (origin.includes("*"))
      problems.push({ key: `Cors:Origins:${i}`, problem: "must be an explicit origin, not a wildcard" });
    else if (!isHttpOrigin(origin))
      problems.push({ key: `Cors:Origins:${i}`, problem: "must be an http(s) origin" });
  });
  if (cors.Origins.length > 0) {
    // explicit lists: with none, a CORS layer would answer whatever a preflight asks for
    if (cors.Methods.length === 0)
      problems.push({ key: "Cors:Methods", problem: "must list methods when Cors:Origins is set" });
    if (cors.Headers.length === 0)
      problems.push({ key: "Cors:Headers", problem: "must list request headers when Cors:Origins is set" });
    cors.Headers.forEach((header, i) => {
      if (header.trim() === "*")
        problems.push({ key: `Cors:Headers:${i}`, problem: "must be an explicit header name, not *" });
    });
    cors.Methods.forEach((method, i) => {
      if (method.trim() === "*")
        problems.push({ key: `Cors:Methods:${i}`, problem: "must be an explicit method, not *" });
    });
  }
  return problems;
}

/** Every check of the spec's "Security and network settings" table, by key, never by value. */
export function checkProduction(config: AppConfig): ConfigProblem[] {
  const s = config.settings;
  const problems: ConfigProblem[] = [];
  const need = (key: string, value: unknown) => {
    if (value === undefined || value === null || value === "")
      problems.push({ key, problem: "is required in Production" });
  };

  if (!config.cache)
    problems.push({ key: "ConnectionStrings:Cache", problem: "is required (or CACHE_URL) in Production" });
  else problems.push(...checkCacheUrl(config.cache));

  need("Security:Jwt:Issuer", s.Security.Jwt.Issuer);
  need("Security:Jwt:Audience", s.Security.Jwt.Audience);
  problems.push(...parseJwtKeys(s.Security.Jwt).problems);

  const dp = s.Security.DataProtection;
  need("Security:DataProtection:ApplicationName", dp.ApplicationName);
  need("Security:DataProtection:CertificatePath", dp.CertificatePath);
  problems.push(...checkCertificates(dp));

  // every problem that leaves the service without a tenant-secret keyring (a master key's format,
  // a key id used twice) stops start-up: otherwise every tenant secret would answer 503
  need("Security:TenantSecrets:KeyId", s.Security.TenantSecrets.KeyId);
  for (const problem of parseTenantSecretKeys(s.Security.TenantSecrets).problems)
    if (problem.key !== "Security:TenantSecrets:KeyId") problems.push(problem);

  if ((s.Authentication.Sms.CodePepper ?? "").length < 32) {
    problems.push({ key: "Authentication:Sms:CodePepper", problem: "must be at least 32 characters" });
  }

  if (s.Authentication.Sms.Provider === "http") {
    need("Authentication:Sms:HttpUrl", s.Authentication.Sms.HttpUrl);
    need("Authentication:Sms:HttpApiKey", s.Authentication.Sms.HttpApiKey);
  }

  const resolution = s.Tenancy.Resolution;
  if (!resolution.PlatformHost) need("Tenancy:Resolution:PlatformHost", resolution.PlatformHost);
  else if (!isHostName(resolution.PlatformHost)) {
    problems.push({
      key: "Tenancy:Resolution:PlatformHost",
      problem: "must be a host name (no scheme, port or path)",
    });
  }
  resolution.TrustedProxies.forEach((proxy, i) => {
    if (!isIpOrCidr(proxy))
      problems.push({ key: `Tenancy:Resolution:TrustedProxies:${i}`, problem: "must be an IP or CIDR" });
  });
  resolution.TenantCodePaths.forEach((path, i) => {
    if (!path.startsWith("/"))
      problems.push({ key: `Tenancy:Resolution:TenantCodePaths:${i}`, problem: "must start with /" });
  });

  if (s.AllowedHosts.length === 0)
    problems.push({ key: "AllowedHosts", problem: "must list at least one host in Production" });
  s.AllowedHosts.forEach((host, i) => {
    if (host.includes("*"))
      problems.push({ key: `AllowedHosts:${i}`, problem: "must not contain wildcards" });
    else if (!isHostName(host)) problems.push({ key: `AllowedHosts:${i}`, problem: "must be a host name" });
  });

  problems.push(...checkCors(s.Cors));

  s.BrowserAuth.AllowedOrigins.forEach((origin, i) => {
    if (!isHttpOrigin(origin))
      problems.push({ key: `BrowserAuth:AllowedOrigins:${i}`, problem: "must be an http(s) origin" });
  });

  need("RateLimiting:Global:PermitLimit", s.RateLimiting.Global.PermitLimit);
  need("RateLimiting:Global:WindowSeconds", s.RateLimiting.Global.WindowSeconds);
  need("RateLimiting:Auth:PermitLimit", s.RateLimiting.Auth.PermitLimit);
  need("RateLimiting:Auth:WindowSeconds", s.RateLimiting.Auth.WindowSeconds);

  // the gateway key travels as a Bearer token, and DNS answers decide which hosts are served
  const domains = s.TenantDomains;
  for (const [key, value] of [
    ["TenantDomains:GatewayBaseUrl", domains.GatewayBaseUrl],
    ["TenantDomains:DnsJsonEndpoint", domains.DnsJsonEndpoint],
  ] as const)
    if (value && new URL(value).protocol !== "https:")
      problems.push({ key, problem: "must be an https:// URL in Production" });
  domains.AllowedCnameTargets.forEach((target, i) => {
    if (!isHostName(target.replace(/\.$/, "")))
      problems.push({ key: `TenantDomains:AllowedCnameTargets:${i}`, problem: "must be a host name" });
  });
  return problems;
}
