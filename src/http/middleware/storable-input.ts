import type { MiddlewareHandler } from "hono";
import { routePath } from "hono/route";
import { AppError, type FieldError } from "../../errors.ts";
import type { AppEnv } from "../request-context.ts";

const SUSPECT = /[\0\ud800-\udfff]/;
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/**
 * Text PostgreSQL cannot store as given: U+0000 (refused in `text` and `jsonb`, SQLSTATE 22021 /
 * 22P05) and an unpaired UTF-16 surrogate (no UTF-8 form: the driver would write U+FFFD instead).
 */
export const unstorable = (text: string): boolean =>
  // the character class scans fast (~0.2 µs over a bearer token; the look-around alone ~4 µs), so
  // only text that holds a NUL or some surrogate is looked at closely
  SUSPECT.test(text) && (text.includes("\0") || LONE_SURROGATE.test(text));

const MESSAGE = "contains a character that cannot be stored (U+0000 or an unpaired surrogate)";

/** A name for a field that is itself unstorable: its bad characters written as escapes. */
const printable = (name: string): string =>
  name.replaceAll(/\0|[\ud800-\udfff]/g, (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, "0")}`);

/** The paths (`a.b.0`, as validation errors name fields) of the unstorable strings and keys in `value`. */
function unstorableIn(value: unknown, path: string[], found: string[]): void {
  if (typeof value === "string") {
    if (unstorable(value)) found.push(path.join(".") || "(body)");
  } else if (Array.isArray(value)) {
    for (const [i, item] of value.entries()) unstorableIn(item, [...path, String(i)], found);
  } else if (value !== null && typeof value === "object") {
    for (const [key, item] of Object.entries(value)) {
      if (unstorable(key)) found.push([...path, printable(key)].join("."));
      else unstorableIn(item, [...path, key], found);
    }
  }
}

// In JSON text an unstorable string shows as a raw NUL, a `\u0000` escape or a surrogate escape (a
// body decoded from UTF-8 has no raw lone surrogate); the body is parsed only when one shows.
const SUSPECT_JSON = /\0|\\u(?:0000|[dD][89a-fA-F][0-9a-fA-F]{2})/;
const JSON_TYPE = /^application\/(?:[\w.+-]+\+)?json\b/i;
const FORM_TYPE = /^application\/x-www-form-urlencoded\b/i;

/** The path parameter a segment of the matched route stands for (`:id` → `id`), else `path`. */
function segmentName(pattern: string, index: number): string {
  const segment = pattern.split("/")[index];
  return segment?.startsWith(":") ? segment.slice(1).replace(/\{.*$/, "").replace(/\?$/, "") : "path";
}

const decoded = (segment: string): string => {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment; // malformed percent-encoding is kept as is, as the router keeps it
  }
};

/**
 * The one input guard at the edge, for every operation: a JSON or form body string (or key), a
 * query parameter or a path segment that PostgreSQL could not store is a 400 `validation_failed`
 * naming each such field, before any handler or query sees it (a header value cannot hold such text).
 */
export function refuseUnstorableInput(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const fields: FieldError[] = [];
    const add = (path: string) => fields.push({ path, message: MESSAGE });
    // A request's URL is serialised (percent-encoded ASCII): its path and query can only hold such
    // text once decoded, so a URL without `%` needs no closer look.
    const href = c.req.url;
    if (href.includes("%")) {
      const url = new URL(href);
      const segments = url.pathname.split("/");
      if (segments.some((segment) => unstorable(decoded(segment)))) {
        const pattern = routePath(c, -1);
        segments.forEach((segment, i) => {
          if (unstorable(decoded(segment))) add(segmentName(pattern, i));
        });
      }
      for (const [key, value] of url.searchParams) {
        if (unstorable(key)) add(printable(key));
        else if (unstorable(value)) add(key);
      }
    }
    // No header value needs a look: a `Headers` object refuses a NUL and holds bytes (Latin-1, never
    // a surrogate) by the Fetch standard, and Bun's and Deno's servers answer a raw NUL with 400
    // before the app (tests/unit/storable-input.test.ts); walking every header was ~1 µs a request.
    const type = c.req.method === "GET" || c.req.method === "HEAD" ? undefined : c.req.header("content-type");
    if (type) {
      if (JSON_TYPE.test(type)) {
        const text = await c.req.text();
        if (SUSPECT_JSON.test(text)) {
          let body: unknown;
          try {
            body = JSON.parse(text);
          } catch {
            body = undefined; // not JSON: the route's validation answers that
          }
          const found: string[] = [];
          unstorableIn(body, [], found);
          for (const path of found) add(path);
        }
      } else if (FORM_TYPE.test(type)) {
        for (const [key, value] of new URLSearchParams(await c.req.text())) {
          if (unstorable(key)) add(printable(key));
          else if (unstorable(value)) add(key);
        }
      }
    }
    if (fields.length > 0) throw new AppError("validation_failed", "The request is not valid.", { fields });
    return next();
  };
}
