import { and, eq } from "drizzle-orm";
import type { TenantCtx } from "../../context.ts";
import { withDatabase } from "../../db/operation.ts";
import { ssoConnections } from "../../db/schema/sso.ts";
import { AppError } from "../../errors.ts";
import { isUuid } from "../../uuid.ts";
import type { SsoDeps } from "../sso-deps.ts";
import { serviceProviderOf } from "./saml-service-provider.ts";
import { serviceProviderMetadata } from "./saml-settings.ts";

/** The SP metadata of one of the ctx tenant's SAML connections (another tenant's, or an OIDC one: 404). */
export async function getSamlServiceProviderMetadata(
  deps: SsoDeps,
  ctx: TenantCtx,
  input: { id: string },
): Promise<string> {
  if (!isUuid(input.id)) throw new AppError("not_found");
  const [row] = await withDatabase(deps, ctx, (db) =>
    db
      .select({ id: ssoConnections.id })
      .from(ssoConnections)
      .where(
        and(
          eq(ssoConnections.id, input.id),
          eq(ssoConnections.tenantId, ctx.tenantId),
          eq(ssoConnections.type, "saml"),
        ),
      ),
  );
  if (!row) throw new AppError("not_found", "No SAML connection with this id.");
  return serviceProviderMetadata(serviceProviderOf(deps.config.settings, row.id));
}
