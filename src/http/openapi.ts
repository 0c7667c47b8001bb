import { z } from "@hono/zod-openapi";

/** The application/problem+json body every error has (see errors.ts): the one `Problem` schema. */
export const problemSchema = z
  .object({
    type: z.string(),
    title: z.string(),
    status: z.number().int(),
    code: z.string(),
    detail: z.string(),
    instance: z.string(),
    requestId: z.string().optional(),
    errors: z.array(z.object({ path: z.string(), message: z.string() })).optional(),
  })
  .openapi("Problem");

/** An error response of the document: the `Problem` schema as `application/problem+json`. */
export const problem = (description: string) => ({
  description,
  content: { "application/problem+json": { schema: problemSchema } },
});

/** A JSON response of the document. */
export const json = <T extends z.ZodType>(description: string, schema: T) => ({
  description,
  content: { "application/json": { schema } },
});

/** A required JSON request body. */
export const jsonBody = <T extends z.ZodType>(schema: T) => ({
  required: true,
  content: { "application/json": { schema } },
});

/** The bearer-token security requirement. */
export const bearer = [{ bearer: [] }];

/** `{tenantId}` in an admin path. */
export const tenantIdParam = z.object({
  tenantId: z.string().openapi({ param: { name: "tenantId", in: "path" } }),
});
