import { attributeName } from "./scim-filter.ts";

/** Attributes every representation keeps (RFC 7643 §7 `returned: always`). */
const ALWAYS = new Set(["id", "schemas", "meta"]);

const names = (list: string | undefined, urns: readonly string[]) =>
  (list ?? "")
    .split(",")
    .map((item) => item.trim())
    .filter(Boolean)
    .map((item) => attributeName(item, urns).split(".")[0] ?? "");

/**
 * `?attributes=` and `?excludedAttributes=` (RFC 7644 §3.4.2.5) on a representation, by top-level
 * attribute (a sub-attribute named keeps or drops its whole attribute).
 */
export function project<T extends Record<string, unknown>>(
  resource: T,
  query: { attributes?: string; excludedAttributes?: string },
  urns: readonly string[],
): Partial<T> {
  const only = names(query.attributes, urns);
  const excluded = new Set(names(query.excludedAttributes, urns));
  if (only.length === 0 && excluded.size === 0) return resource;
  const keep = new Set(only);
  return Object.fromEntries(
    Object.entries(resource).filter(([key]) => {
      const lower = key.toLowerCase();
      if (ALWAYS.has(lower)) return true;
      if (keep.size > 0) return keep.has(lower);
      return !excluded.has(lower);
    }),
  ) as Partial<T>;
}
