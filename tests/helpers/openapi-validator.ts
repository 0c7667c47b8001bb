import Ajv2020, { type ValidateFunction } from "ajv/dist/2020";
import addFormats from "ajv-formats";

/**
 * Checks every answer of the app against its own OpenAPI document (`/api/openapi.json`): the path
 * and method are declared, the status is declared for the operation, the content type is one it
 * declares, a JSON body matches the declared schema, the headers a client relies on
 * (`NOTABLE_HEADERS`) are declared for that response, a required header is sent, and every declared
 * header that is sent matches its schema. A path the document does not list may only
 * answer 404 (and a method a path does not answer only 405 with `Allow`), as `Problem`s. CORS
 * preflights (OPTIONS) are the CORS middleware's and are not checked.
 */

interface Operation {
  responses: Record<string, ResponseObject | { $ref: string }>;
}
interface ResponseObject {
  headers?: Record<string, unknown>;
  content?: Record<string, { schema?: unknown }>;
}
export interface OpenApiDocument {
  paths: Record<string, Record<string, Operation>>;
  components?: { headers?: Record<string, HeaderObject> };
}
interface HeaderObject {
  required?: boolean;
  schema?: { type?: string; [keyword: string]: unknown };
}

/** Headers whose presence a response must declare. */
const NOTABLE_HEADERS = [
  "ratelimit",
  "ratelimit-policy",
  "retry-after",
  "www-authenticate",
  "allow",
  "set-cookie",
  "x-request-id",
  "location",
  "etag",
];

const pointer = (...parts: string[]) =>
  parts.map((part) => part.replaceAll("~", "~0").replaceAll("/", "~1")).join("/");

export class ContractViolation extends Error {
  override name = "ContractViolation";
}

export function responseValidator(doc: OpenApiDocument, options: { exempt?: readonly string[] } = {}) {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats(ajv);
  ajv.addSchema({ ...doc, $id: "openapi" });
  const compiled = new Map<string, ValidateFunction>();
  const schemaAt = (ref: string): ValidateFunction => {
    let validate = compiled.get(ref);
    if (!validate) {
      validate = ajv.getSchema(`openapi#/${ref}`);
      if (!validate) throw new Error(`no schema at ${ref}`);
      compiled.set(ref, validate);
    }
    return validate;
  };
  // a concrete path wins over a templated one (OpenAPI: /jobs/cancel before /jobs/{id})
  const templateCount = (template: string) => template.split("{").length;
  const templates = Object.keys(doc.paths)
    .sort((a, b) => templateCount(a) - templateCount(b))
    .map((template) => ({
      template,
      pattern: new RegExp(
        `^${template.replace(/[.*+?^$()|[\]\\]/g, "\\$&").replace(/\{[^}]+\}/g, "[^/]+")}$`,
      ),
    }));
  const exempt = new Set(options.exempt ?? []);
  const resolveHeader = (header: unknown): HeaderObject | undefined => {
    const ref = (header as { $ref?: string }).$ref;
    if (ref === undefined) return header as HeaderObject;
    return doc.components?.headers?.[ref.replace("#/components/headers/", "")];
  };
  const headerSchemas = new Map<string, ValidateFunction>();
  /** A header value against its schema (an integer header as its number). */
  const headerMatches = (schema: NonNullable<HeaderObject["schema"]>, value: string): string | null => {
    const key = JSON.stringify(schema);
    let validate = headerSchemas.get(key);
    if (!validate) {
      validate = ajv.compile(schema);
      headerSchemas.set(key, validate);
    }
    const typed = schema.type === "integer" || schema.type === "number" ? Number(value) : value;
    return validate(typed) ? null : ajv.errorsText(validate.errors);
  };

  async function problemOnly(what: string, response: Response, statuses: number[]): Promise<void> {
    if (!statuses.includes(response.status))
      throw new ContractViolation(`${what}: answered ${response.status}, which the document cannot declare`);
    await checkBody(what, response, "components/schemas/Problem", "application/problem+json");
  }

  async function checkBody(what: string, response: Response, schemaRef: string | null, mediaType: string) {
    if (!mediaType.endsWith("json") || schemaRef === null) return;
    const text = await response.clone().text();
    if (mediaType === "application/x-ndjson") return checkLines(what, text, schemaRef);
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      throw new ContractViolation(`${what}: ${mediaType} body is not JSON: ${text.slice(0, 200)}`);
    }
    const validate = schemaAt(schemaRef);
    if (!validate(body)) {
      throw new ContractViolation(
        `${what}: body does not match ${schemaRef}: ${ajv.errorsText(validate.errors)}\n${text.slice(0, 500)}`,
      );
    }
  }

  /** NDJSON: every line one value of the declared schema. */
  function checkLines(what: string, text: string, schemaRef: string): void {
    const validate = schemaAt(schemaRef);
    const lines = text.split("\n");
    if (lines.pop() !== "") throw new ContractViolation(`${what}: NDJSON does not end with a newline`);
    for (const [n, line] of lines.entries()) {
      let value: unknown;
      try {
        value = JSON.parse(line);
      } catch {
        throw new ContractViolation(`${what}: NDJSON line ${n + 1} is not JSON: ${line.slice(0, 200)}`);
      }
      if (!validate(value))
        throw new ContractViolation(
          `${what}: NDJSON line ${n + 1} does not match ${schemaRef}: ${ajv.errorsText(validate.errors)}`,
        );
    }
  }

  return async function check(request: Request, response: Response): Promise<void> {
    const method = request.method.toLowerCase();
    if (method === "options") return;
    const path = new URL(request.url).pathname;
    if (exempt.has(path)) return;
    const what = `${request.method} ${path} → ${response.status}`;
    const found = templates.find(({ pattern }) => pattern.test(path));
    // the host check, the rate limits and the body limit answer before routing, on any path and method
    const beforeRouting = [400, 413, 429];
    if (!found)
      return problemOnly(`${what} (no such path in the document)`, response, [...beforeRouting, 404]);
    const item = doc.paths[found.template] ?? {};
    const operationMethod = method === "head" ? "get" : method;
    const operation = item[operationMethod];
    if (!operation) {
      if (response.status === 405 && !response.headers.has("allow"))
        throw new ContractViolation(`${what}: 405 without Allow`);
      return problemOnly(`${what} (method not in the document)`, response, [...beforeRouting, 404, 405]);
    }
    const status = String(response.status);
    const key = [status, `${status[0]}XX`, "default"].find((k) => k in operation.responses);
    if (!key) {
      throw new ContractViolation(
        `${what}: status not declared for ${operationMethod.toUpperCase()} ${found.template} (declared: ${Object.keys(operation.responses).join(", ")})`,
      );
    }
    const declared = operation.responses[key] as ResponseObject;
    const declaredHeaders = new Set(Object.keys(declared.headers ?? {}).map((h) => h.toLowerCase()));
    for (const header of NOTABLE_HEADERS) {
      if (response.headers.has(header) && !declaredHeaders.has(header))
        throw new ContractViolation(`${what}: header ${header} not declared for this response`);
    }
    for (const [name, header] of Object.entries(declared.headers ?? {})) {
      const resolved = resolveHeader(header);
      const value = response.headers.get(name);
      if (value === null) {
        if (resolved?.required) throw new ContractViolation(`${what}: required header ${name} missing`);
        continue;
      }
      const mismatch = resolved?.schema ? headerMatches(resolved.schema, value) : null;
      if (mismatch !== null)
        throw new ContractViolation(`${what}: header ${name} "${value}" is off its schema: ${mismatch}`);
    }
    const contentType = response.headers.get("content-type");
    const hasBody = method !== "head" && response.status !== 204 && response.status !== 304;
    if (!hasBody || contentType === null) {
      if (hasBody && declared.content && (await response.clone().text()).length > 0)
        throw new ContractViolation(`${what}: a body without a content type`);
      return;
    }
    const mediaType = contentType.split(";")[0]?.trim().toLowerCase() ?? "";
    const content = declared.content ?? {};
    if (!(mediaType in content)) {
      if ((await response.clone().text()).length === 0) return;
      throw new ContractViolation(
        `${what}: content type ${mediaType} not declared (declared: ${Object.keys(content).join(", ") || "no body"})`,
      );
    }
    const schemaRef =
      content[mediaType]?.schema === undefined
        ? null
        : pointer("paths", found.template, operationMethod, "responses", key, "content", mediaType, "schema");
    await checkBody(what, response, schemaRef, mediaType);
  };
}
