import { OpenAPIHono } from "@hono/zod-openapi";
import type { Deps } from "../deps.ts";
import { fieldErrors, ProblemError } from "./errors.ts";

/** Per-request values set by middleware. Areas add theirs (auth: the principal, tenancy: the tenant). */
export type AppEnv = {
  Variables: {
    requestId: string;
  };
};

/** A router whose request validation fails as a 400 problem naming the fields. */
export function createRouter() {
  return new OpenAPIHono<AppEnv>({
    defaultHook: (result) => {
      if (!result.success) {
        throw new ProblemError("validation_failed", "The request is not valid.", {
          errors: fieldErrors(result.error),
        });
      }
    },
  });
}

export type Router = ReturnType<typeof createRouter>;
export type RouteModule = (deps: Deps) => Router;
