import { z } from "@hono/zod-openapi";

/** The application/problem+json body every error has (see errors.ts). */
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

export const problemResponse = (description: string) => ({
  description,
  content: { "application/problem+json": { schema: problemSchema } },
});
