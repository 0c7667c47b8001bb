import { expect } from "bun:test";
import type { TestHarness } from "./app.ts";
import { Jar } from "./cookie-jar.ts";
import { PASSWORD, type SignedInTenant } from "./identity.ts";

/** The CSRF token of a console page's forms. */
export const csrfOf = (page: string) => /name="csrf" value="([^"]+)"/.exec(page)?.[1] ?? "";

/**
 * The console as a tenant's owner or admin uses it over HTTP: form posts from `origin` (an allowed
 * browser origin of `app`), page reads, and the sign-in with the organisation code.
 */
export function tenantConsole(app: TestHarness, origin: string) {
  const post = (jar: Jar, path: string, body: Record<string, string>) =>
    app.request(path, {
      method: "POST",
      headers: { cookie: jar.header(), origin, "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams(body).toString(),
    });
  const get = (jar: Jar, path: string) => app.request(path, { headers: { cookie: jar.header() } });
  /** Signs `email` in to `tenant`'s console: the cookie jar and the CSRF token of its forms. */
  const signInAs = async (tenant: SignedInTenant, email: string): Promise<{ jar: Jar; csrf: string }> => {
    const jar = new Jar();
    const signedIn = jar.take(
      await post(jar, "/console/sign-in", { email, password: PASSWORD, tenant: tenant.code }),
    );
    expect(signedIn.status).toBe(303);
    return { jar, csrf: csrfOf(await (await get(jar, "/console/mfa")).text()) };
  };
  return { post, get, signInAs };
}
