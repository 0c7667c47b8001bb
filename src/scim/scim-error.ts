import { AppError, type ErrorCode } from "../errors.ts";

/** RFC 7644 §3.12 `scimType` values Plinth answers with. */
export type ScimType =
  | "invalidFilter"
  | "tooMany"
  | "uniqueness"
  | "mutability"
  | "invalidSyntax"
  | "invalidPath"
  | "noTarget"
  | "invalidValue"
  | "invalidVers";

/**
 * An error of the SCIM protocol: an `AppError` (its code gives the status) with the `scimType` the
 * SCIM error body carries (src/http/routes/scim.ts renders it as RFC 7644 §3.12 asks).
 */
export class ScimError extends AppError {
  override name = "ScimError";
  readonly scimType: ScimType | undefined;
  constructor(code: ErrorCode, detail: string, scimType?: ScimType) {
    super(code, detail);
    this.scimType = scimType;
  }
}

export const scimNotFound = (what: "User" | "Group") =>
  new ScimError("not_found", `No such ${what} in this tenant.`);

export const invalidValue = (detail: string) => new ScimError("validation_failed", detail, "invalidValue");
