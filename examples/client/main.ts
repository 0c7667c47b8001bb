/**
 * A consumer of the Plinth API through a client generated from its OpenAPI document:
 * `bun run openapi:types` writes `schema.d.ts`, openapi-fetch types every call by it. CI
 * type-checks this file under `--strict` (`bun run openapi:client`). Run it against a server:
 * `PLINTH_URL=http://localhost:3000 PLINTH_EMAIL=… PLINTH_PASSWORD=… PLINTH_TENANT=… bun examples/client/main.ts`.
 */
import createClient from "openapi-fetch";
import type { components, paths } from "./schema.d.ts";

type Problem = components["schemas"]["Problem"];
type TenantUser = components["schemas"]["TenantUser"];

/** What a failed call leaves: the Problem every error is (`code` is stable, `detail` is for people). */
function describe(problem: Problem): string {
  return `${problem.status} ${problem.code}: ${problem.detail} (request ${problem.requestId ?? "?"})`;
}

export async function main(
  baseUrl: string,
  credentials: { email: string; password: string; tenant?: string },
  fetch?: (request: Request) => Promise<Response>,
): Promise<{ users: TenantUser[]; domainCreated: boolean }> {
  const api = createClient<paths>({ baseUrl, fetch });

  // sign in: a token pair, or a Problem (401 for any wrong credential, 429 when a window is full)
  const signIn = await api.POST("/api/auth/login", { body: credentials });
  if (signIn.error) throw new Error(describe(signIn.error));
  // a user with a second factor gets the step instead: POST /api/auth/mfa/verify { mfaToken, code }
  if ("mfaToken" in signIn.data)
    throw new Error(`a second factor is required (${signIn.data.methods.join(", ")})`);
  const { accessToken, refreshToken } = signIn.data;
  const headers = { authorization: `Bearer ${accessToken}` };

  // who am I
  const me = await api.GET("/api/auth/me", { headers });
  if (me.error) throw new Error(describe(me.error));
  console.log(`signed in as ${me.data.user.email}, roles ${me.data.roles.join(", ")}`);

  // every user of the tenant, a page at a time (owners only: others get a 403 Problem)
  const users: TenantUser[] = [];
  let cursor: string | undefined;
  do {
    const page = await api.GET("/api/tenant/users", { headers, params: { query: { limit: 100, cursor } } });
    if (page.error) throw new Error(describe(page.error));
    users.push(...page.data.items);
    cursor = page.data.nextCursor ?? undefined;
  } while (cursor);
  console.log(`${users.length} users`);

  // add a custom domain: 201 with the records to set, or a typed Problem
  const domain = await api.POST("/api/tenant/domains", {
    headers,
    body: { hostname: "app.customer.example" },
  });
  if (domain.error) {
    // e.g. 402 payment_required, 403 usage_limit_reached, 409 conflict
    console.log(`domain refused: ${describe(domain.error)}`);
  } else {
    console.log(`add TXT ${domain.data.verification.name} = ${domain.data.verification.value}`);
  }

  // the status of a call is there too: 204 bodies are typed as absent
  const signOut = await api.POST("/api/auth/logout", { body: { refreshToken } });
  if (signOut.error) throw new Error(describe(signOut.error));
  console.log(`signed out (${signOut.response.status})`);
  return { users, domainCreated: domain.error === undefined };
}

const env = (globalThis as { process?: { env: Record<string, string | undefined> } }).process?.env ?? {};
if (env.PLINTH_URL && env.PLINTH_EMAIL && env.PLINTH_PASSWORD) {
  await main(env.PLINTH_URL, {
    email: env.PLINTH_EMAIL,
    password: env.PLINTH_PASSWORD,
    tenant: env.PLINTH_TENANT,
  });
}
