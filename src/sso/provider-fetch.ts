import http from "node:http";
import https from "node:https";
import { isIP } from "node:net";
import type { Deps } from "../deps.ts";
import type { Fetch } from "../telemetry/fetch.ts";
import {
  checkAddresses,
  checkUrlForm,
  type DestinationPolicy,
  DestinationRefused,
  pinnedLookup,
} from "../webhooks/destinations.ts";

/** How long one request to an identity provider may take, and how much of its answer is read. */
export const PROVIDER_TIMEOUT_MS = 10_000;
export const MAX_PROVIDER_RESPONSE_BYTES = 1024 * 1024;

export type ProviderFetchDeps = Pick<Deps, "config" | "hostResolver">;

/**
 * Where Plinth may call an identity provider (SSRF protection, docs/sso.md "Provider addresses"):
 * the webhook destination rules (every resolved address public, https in Production), lifted for
 * private addresses only by `Sso:AllowPrivateProviders`.
 */
export function providerPolicy(deps: ProviderFetchDeps): DestinationPolicy {
  return {
    httpsOnly: deps.config.environment === "Production",
    allowPrivate: deps.config.settings.Sso.AllowPrivateProviders,
    resolve: deps.hostResolver,
  };
}

/** A provider could not be reached (refused address, network, TLS, timeout): never its answer's body. */
export class ProviderUnreachable extends Error {
  override name = "ProviderUnreachable";
}

const bodyOf = (body: RequestInit["body"]): string | Uint8Array | undefined => {
  if (body === undefined || body === null) return undefined;
  if (typeof body === "string" || body instanceof Uint8Array) return body;
  if (body instanceof URLSearchParams) return body.toString();
  if (body instanceof ArrayBuffer) return new Uint8Array(body);
  throw new TypeError("a provider request body must be text, form parameters or bytes");
};

/**
 * A `fetch` for identity providers (OIDC discovery, JWKS, token and userinfo endpoints; SAML
 * metadata): the host is resolved once and every address checked (`providerPolicy`), and the
 * connection is made only to the checked addresses (node's HTTP client with a pinned lookup, the
 * name kept as Host and TLS server name), so a DNS answer that changes after the check cannot point
 * it inward. Redirects are answered, never followed; 10 seconds; at most 1 MiB of answer.
 */
export function providerFetch(deps: ProviderFetchDeps): Fetch {
  const policy = providerPolicy(deps);
  const call = async (input: string | URL | Request, init: RequestInit = {}): Promise<Response> => {
    const url = new URL(input instanceof Request ? input.url : input.toString());
    checkUrlForm(url, policy);
    const host = url.hostname.replace(/^\[|\]$/g, "");
    // node connects to an address literal without a lookup: checked here instead
    if (isIP(host)) await checkAddresses(host, policy);
    const body = bodyOf(init.body);
    const headers = Object.fromEntries(new Headers(init.headers).entries());
    if (body !== undefined) headers["content-length"] = String(Buffer.byteLength(body));
    return new Promise<Response>((resolve, reject) => {
      const client = url.protocol === "https:" ? https : http;
      const request = client.request(
        url,
        { method: init.method ?? "GET", headers, lookup: pinnedLookup(policy), timeout: PROVIDER_TIMEOUT_MS },
        (response) => {
          const chunks: Buffer[] = [];
          let read = 0;
          response.on("data", (chunk: Buffer) => {
            read += chunk.length;
            if (read > MAX_PROVIDER_RESPONSE_BYTES) {
              request.destroy();
              reject(new ProviderUnreachable(`answered more than ${MAX_PROVIDER_RESPONSE_BYTES} bytes`));
            } else chunks.push(chunk);
          });
          response.on("error", (error) => reject(new ProviderUnreachable(error.message)));
          response.on("end", () => {
            const answer = new Headers();
            for (const [name, value] of Object.entries(response.headers))
              for (const one of [value ?? []].flat()) answer.append(name, one);
            const status = response.statusCode ?? 502;
            const empty = status === 204 || status === 304;
            resolve(new Response(empty ? null : Buffer.concat(chunks), { status, headers: answer }));
          });
        },
      );
      request.on("timeout", () => {
        request.destroy();
        reject(new ProviderUnreachable(`no answer within ${PROVIDER_TIMEOUT_MS / 1000} seconds`));
      });
      request.on("error", (error: Error & { code?: string }) =>
        reject(
          error instanceof DestinationRefused ? error : new ProviderUnreachable(error.code ?? error.message),
        ),
      );
      init.signal?.addEventListener("abort", () => request.destroy(new Error("aborted")), { once: true });
      request.end(body);
    });
  };
  return call as Fetch;
}
