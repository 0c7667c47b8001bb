import type { Ctx } from "../context.ts";
import type { Deps } from "../deps.ts";
import { AppError } from "../errors.ts";
import { parseHostname } from "../tenancy/hostnames.ts";
import { normaliseHost } from "../tenancy/hosts.ts";

/**
 * The on-demand TLS question of an edge (Caddy's `ask`): may a certificate be issued for this
 * name? Yes only for the platform host and Active domains of Active tenants, asked in their exact
 * canonical form (src/tenancy/hostnames.ts): `name:443`, `name/x`, `name?x`, upper case, full-width
 * letters or ideographic dots are refused, never folded into the real name (404). Answers come from
 * the tenant lookup's in-process cache (30 s, unknown names too), so a flood of made-up names
 * costs one indexed query per name and window; a domain activated by another process is allowed
 * within 30 s.
 */
export async function getTlsPermission(
  deps: Pick<Deps, "config" | "tenants">,
  _ctx: Ctx,
  input: { domain: string },
): Promise<{ domain: string; allowed: true }> {
  const raw = input.domain;
  if (raw === normaliseHost(deps.config.settings.Tenancy.Resolution.PlatformHost))
    return { domain: raw, allowed: true };
  const parsed = parseHostname(raw, { deniedSuffixes: deps.config.settings.TenantDomains.DeniedSuffixes });
  if (parsed.ok && parsed.hostname === raw && (await deps.tenants.byDomain(raw)))
    return { domain: raw, allowed: true };
  throw new AppError("not_found", "No certificate is issued for this name.");
}
