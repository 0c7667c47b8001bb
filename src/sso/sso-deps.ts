import type { AuthDeps } from "../auth/deps.ts";
import type { Deps } from "../deps.ts";

/** What single sign-on needs of the process's deps: sign-in's, plus secrets, the cache and outbound HTTP. */
export interface SsoDeps
  extends AuthDeps,
    Pick<Deps, "tenantSecretKeyring" | "cache" | "fetch" | "tenants" | "hostResolver"> {}
