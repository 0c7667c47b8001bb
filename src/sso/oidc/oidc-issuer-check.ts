import { AppError } from "../../errors.ts";
import { DestinationRefused } from "../../webhooks/destinations.ts";
import { ProviderUnreachable } from "../provider-fetch.ts";
import type { SsoDeps } from "../sso-deps.ts";
import { discoverIssuer } from "./oidc-configuration.ts";

const unusable = (message: string) =>
  new AppError("unprocessable", `The issuer cannot be used: ${message}.`, {
    fields: [{ path: "issuer", message }],
  });

/**
 * Checks an OIDC issuer before a connection names it: its discovery document is fetched through the
 * provider guard and must name this issuer, an authorization, a token and a JWKS endpoint, and offer
 * the code flow. 422 naming `issuer` and what failed (a refused address, an HTTP status, a mismatched
 * `issuer`…); 503 when the provider cannot be reached (down, timeout: try again).
 */
export async function checkOidcIssuer(deps: SsoDeps, issuer: string): Promise<string> {
  let url: URL;
  try {
    url = new URL(issuer);
  } catch {
    throw unusable("not an absolute URL");
  }
  if (url.search || url.hash) throw unusable("an issuer has no query or fragment");
  if (url.protocol === "http:" && deps.config.environment !== "Development")
    throw unusable("https_required: a plain-http issuer is accepted only in Development");
  let server: Awaited<ReturnType<typeof discoverIssuer>>;
  try {
    server = await discoverIssuer(deps, issuer);
  } catch (error) {
    if (error instanceof DestinationRefused) throw unusable(`${error.rule}: ${error.message}`);
    const cause = error instanceof Error ? (error.cause ?? error) : error;
    if (cause instanceof ProviderUnreachable)
      throw new AppError("unavailable", `The issuer could not be reached: ${cause.message}.`);
    if (cause instanceof DestinationRefused) throw unusable(`${cause.rule}: ${cause.message}`);
    throw unusable(
      `its discovery document (${issuer.replace(/\/$/, "")}/.well-known/openid-configuration) is not usable: ${(error as Error).message}`,
    );
  }
  const missing = (["authorization_endpoint", "token_endpoint", "jwks_uri"] as const).filter(
    (name) => typeof server[name] !== "string",
  );
  if (missing.length > 0) throw unusable(`its discovery document lacks ${missing.join(", ")}`);
  const types = server.response_types_supported;
  if (Array.isArray(types) && !types.includes("code"))
    throw unusable("the provider does not offer the authorization code flow (response_types_supported)");
  return server.issuer;
}
