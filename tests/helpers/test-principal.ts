import type { MiddlewareHandler } from "hono";
import type { AppEnv, Principal } from "../../src/http/context.ts";

/** Stands in for the auth guards in tests: the principal comes from an `x-test-principal` JSON header. */
export function testPrincipal(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const raw = c.req.header("x-test-principal");
    if (raw) c.set("principal", JSON.parse(raw) as Principal);
    await next();
  };
}

export function principalHeader(principal: Partial<Principal>): Record<string, string> {
  const full: Principal = {
    userId: crypto.randomUUID(),
    tenantId: null,
    roles: [],
    platformRoles: [],
    sessionId: crypto.randomUUID(),
    ...principal,
  };
  return { "x-test-principal": JSON.stringify(full) };
}
