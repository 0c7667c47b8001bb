import { type ScimPatchOperation, type ScimResource, scimPatch } from "scim-patch";
import { ScimError } from "./scim-error.ts";

export const PATCH_OP_SCHEMA = "urn:ietf:params:scim:api:messages:2.0:PatchOp";

/** Attributes whose values are booleans: Entra ID sends them as the strings "True" and "False". */
const BOOLEAN_ATTRIBUTES = new Set(["active", "primary"]);

const MAX_OPERATIONS = 1000;

/** `"True"`/`"False"` (any case) as booleans where the attribute is a boolean, deep in objects and lists. */
function coerceBooleans(value: unknown, key: string | undefined): unknown {
  if (typeof value === "string" && key !== undefined && BOOLEAN_ATTRIBUTES.has(key.toLowerCase())) {
    const lower = value.toLowerCase();
    if (lower === "true") return true;
    if (lower === "false") return false;
  }
  if (Array.isArray(value)) return value.map((item) => coerceBooleans(item, key));
  if (value !== null && typeof value === "object")
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, coerceBooleans(v, k)]));
  return value;
}

/** The last attribute a PATCH path names (`emails[type eq "work"].primary` → `primary`). */
function lastAttribute(path: string | undefined): string | undefined {
  if (!path) return undefined;
  const withoutFilters = path.replace(/\[[^\]]*\]/g, "");
  return withoutFilters.split(/[.:]/).pop();
}

/**
 * Checks a PatchOp body (RFC 7644 §3.5.2) and returns its operations with the forms directories send
 * made regular: `op` in any case (Entra ID: `Replace`), booleans as strings (Entra ID: `"False"`).
 */
export function patchOperations(body: unknown): ScimPatchOperation[] {
  const request = body as { schemas?: unknown; Operations?: unknown } | null;
  if (
    !request ||
    !Array.isArray(request.schemas) ||
    !request.schemas.includes(PATCH_OP_SCHEMA) ||
    !Array.isArray(request.Operations)
  )
    throw new ScimError(
      "validation_failed",
      `A PATCH body is a ${PATCH_OP_SCHEMA} with its Operations.`,
      "invalidSyntax",
    );
  if (request.Operations.length > MAX_OPERATIONS)
    throw new ScimError("validation_failed", `At most ${MAX_OPERATIONS} operations per request.`, "tooMany");
  return request.Operations.map((raw: unknown) => {
    const operation = raw as { op?: unknown; path?: unknown; value?: unknown } | null;
    const op = typeof operation?.op === "string" ? operation.op.toLowerCase() : "";
    if (op !== "add" && op !== "replace" && op !== "remove")
      throw new ScimError(
        "validation_failed",
        'Each operation\'s "op" is add, replace or remove.',
        "invalidSyntax",
      );
    if (operation?.path !== undefined && typeof operation.path !== "string")
      throw new ScimError("validation_failed", 'An operation\'s "path" is a string.', "invalidPath");
    const path = operation?.path as string | undefined;
    if (op === "remove" && !path)
      throw new ScimError("validation_failed", "A remove operation names its path.", "noTarget");
    const value = coerceBooleans(operation?.value, lastAttribute(path));
    return { op, ...(path ? { path } : {}), ...(value === undefined ? {} : { value }) } as ScimPatchOperation;
  });
}

/** Applies operations to a resource's full representation (scim-patch); its errors are SCIM 400s. */
export function applyPatch<T extends ScimResource>(resource: T, operations: ScimPatchOperation[]): T {
  try {
    return scimPatch(resource, operations, { mutateDocument: false, treatMissingAsAdd: true });
  } catch (error) {
    const scimType = (error as { scimType?: string }).scimType;
    throw new ScimError(
      "validation_failed",
      `The PATCH cannot be applied: ${(error as Error).message}`.slice(0, 300),
      scimType === "noTarget" || scimType === "invalidPath" || scimType === "invalidValue"
        ? scimType
        : "invalidValue",
    );
  }
}
