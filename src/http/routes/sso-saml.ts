import { z } from "@hono/zod-openapi";
import { completeSamlSignIn } from "../../sso/saml/saml-acs.ts";
import { getSamlServiceProviderMetadata } from "../../sso/saml/saml-metadata-route.ts";
import type { SsoDeps } from "../../sso/sso-deps.ts";
import { tenantAccess } from "../access.ts";
import { defineArea } from "../area.ts";
import { apiRoute, headerRef, problem } from "../openapi.ts";
import { anonymousCtxOf, createRouter, tenantCtxOf } from "../request-context.ts";
import { readBindingCookie } from "../sso-binding-cookie.ts";
import { answerOutcome, testAnswer } from "./sso-sign-in.ts";

const connectionParam = z.object({
  connectionId: z.string().openapi({ param: { name: "connectionId", in: "path" } }),
});
const idParam = z.object({ id: z.string().openapi({ param: { name: "id", in: "path" } }) });

const routes = {
  acs: apiRoute("public", {
    method: "post",
    path: "/api/auth/sso/saml/{connectionId}/acs",
    operationId: "ssoSamlAcs",
    tags: ["auth"],
    summary: "The SAML assertion consumer service (HTTP-POST binding): finishes a sign-in at the IdP.",
    description:
      "The IdP's browser POST of `SAMLResponse` and `RelayState`. The response must answer the AuthnRequest this sign-in sent, be signed (response or assertion) by a certificate of the IdP's metadata and pass the checks of docs/sso.md (issuer, audience, Destination, Recipient, NotBefore/NotOnOrAfter with a two-minute skew, replay). Then Plinth redirects (303) to `returnTo` with `?code=…`, or `?error=sso_failed` (the failed check is in the audit log) or `?error=seat_limit_reached`; a test sign-in answers its report.",
    request: {
      params: connectionParam,
      body: {
        required: true,
        content: {
          "application/x-www-form-urlencoded": {
            schema: z
              .object({
                SAMLResponse: z.string().max(1_000_000),
                RelayState: z.string().max(512),
              })
              .openapi("SamlPost"),
          },
        },
      },
    },
    responses: {
      200: testAnswer,
      303: {
        description: "To `returnTo` with `?code=…`, or `?error=sso_failed` (or `seat_limit_reached`).",
        headers: { Location: headerRef("Location") },
      },
      400: problem(
        "No sign-in under way for this `RelayState` (unknown, expired, already finished or IdP-initiated).",
      ),
    },
  }),
  metadata: apiRoute(tenantAccess(["owner", "admin"], { apiKey: "none" }), {
    method: "get",
    path: "/api/tenant/sso/connections/{id}/saml-metadata",
    operationId: "tenantGetSamlMetadata",
    tags: ["tenant"],
    summary: "The SAML service-provider metadata of a connection, to import at the IdP.",
    request: { params: idParam },
    responses: {
      200: {
        description:
          "The SP metadata: entity id, ACS URL (HTTP-POST), e-mail NameID, signed assertions wanted.",
        content: { "application/samlmetadata+xml": { schema: z.string().openapi("SamlMetadata") } },
      },
      404: problem("No SAML connection with this id in the tenant."),
    },
  }),
};

/** SAML: the ACS and the SP metadata (docs/sso.md, "SAML"). */
export function ssoSamlRoutes(deps: SsoDeps) {
  return createRouter()
    .openapi(routes.acs, async (c) => {
      const { connectionId } = c.req.valid("param");
      const form = c.req.valid("form");
      const outcome = await completeSamlSignIn(deps, anonymousCtxOf(c), {
        connectionId,
        samlResponse: form.SAMLResponse,
        relayState: form.RelayState,
        browser: readBindingCookie(c, "saml"),
      });
      return answerOutcome(c, outcome) as never;
    })
    .openapi(routes.metadata, async (c) => {
      const xml = await getSamlServiceProviderMetadata(deps, tenantCtxOf(c), { id: c.req.valid("param").id });
      c.header("cache-control", "no-store");
      return c.body(xml, 200, { "content-type": "application/samlmetadata+xml" }) as never;
    });
}

/** The area (src/http/area.ts): listed in src/http/areas.ts, which `bun run areas:generate` writes. */
export const ssoSamlArea = defineArea({ name: "sso-saml", routes: [ssoSamlRoutes] });
