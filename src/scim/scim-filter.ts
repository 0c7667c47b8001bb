import { and, not, or, type SQL, sql } from "drizzle-orm";
import { type Filter, parse } from "scim2-parse-filter";
import { ScimError } from "./scim-error.ts";

/**
 * SCIM filters (RFC 7644 §3.4.2.2) turned into SQL: `scim2-parse-filter` parses, this walks its tree
 * and writes a parameterised condition over the columns a resource type declares. Every operator
 * (`eq ne co sw ew pr gt ge lt le`, `and or not`, `attr[…]`) on the attributes the resource type lists;
 * anything else is a 400 `invalidFilter`. Strings compare case-insensitively unless the attribute is
 * case-exact (`id`, `externalId`), as RFC 7643 defines them.
 */

export type ValueType = "string" | "boolean" | "date";

export interface ScalarColumn {
  kind: "scalar";
  expr: SQL;
  type: ValueType;
  caseExact?: boolean;
}

/** A multi-valued attribute: `exists (… where cond)` over its elements, each with sub-attributes. */
export interface MultiColumn {
  kind: "multi";
  exists: (cond: SQL) => SQL;
  sub: (name: string) => ScalarColumn | undefined;
  /** The sub-attribute a bare `emails eq "x"` means. */
  primary: string;
}

export type FilterColumns = Record<string, ScalarColumn | MultiColumn>;

const invalid = (detail: string) => new ScimError("validation_failed", detail, "invalidFilter");

/** A SCIM attribute path without its schema URN, lower-cased (names are case-insensitive). */
export function attributeName(path: string, schemaUrns: readonly string[]): string {
  let name = path;
  for (const urn of schemaUrns)
    if (name.toLowerCase().startsWith(`${urn.toLowerCase()}:`)) name = name.slice(urn.length + 1);
  return name.toLowerCase();
}

const likeEscape = (value: string) => value.replace(/[\\%_]/g, (c) => `\\${c}`);

function compare(column: ScalarColumn, op: string, value: unknown): SQL {
  if (op === "pr")
    return column.type === "string"
      ? sql`(${column.expr} is not null and ${column.expr} <> '')`
      : sql`${column.expr} is not null`;
  if (column.type === "boolean") {
    if (typeof value !== "boolean" || (op !== "eq" && op !== "ne"))
      throw invalid("A boolean attribute takes eq or ne with true or false.");
    return op === "eq" ? sql`${column.expr} = ${value}` : sql`${column.expr} is distinct from ${value}`;
  }
  if (value === null) {
    if (op === "eq") return sql`${column.expr} is null`;
    if (op === "ne") return sql`${column.expr} is not null`;
    throw invalid(`"${op}" does not take null.`);
  }
  if (typeof value !== "string") throw invalid("This attribute compares with a string.");
  if (column.type === "date") {
    if (Number.isNaN(Date.parse(value))) throw invalid("A dateTime attribute compares with an xsd:dateTime.");
    const at = sql`${value}::timestamptz`;
    const ops: Record<string, SQL> = {
      eq: sql`${column.expr} = ${at}`,
      ne: sql`${column.expr} <> ${at}`,
      gt: sql`${column.expr} > ${at}`,
      ge: sql`${column.expr} >= ${at}`,
      lt: sql`${column.expr} < ${at}`,
      le: sql`${column.expr} <= ${at}`,
    };
    const found = ops[op];
    if (!found) throw invalid(`"${op}" does not apply to a dateTime.`);
    return found;
  }
  const left = column.caseExact ? column.expr : sql`lower(${column.expr})`;
  const right = column.caseExact ? value : value.toLowerCase();
  switch (op) {
    case "eq":
      return sql`${left} = ${right}`;
    case "ne":
      return sql`${left} is distinct from ${right}`;
    case "co":
      return sql`${left} like ${`%${likeEscape(right)}%`}`;
    case "sw":
      return sql`${left} like ${`${likeEscape(right)}%`}`;
    case "ew":
      return sql`${left} like ${`%${likeEscape(right)}`}`;
    case "gt":
      return sql`${left} > ${right}`;
    case "ge":
      return sql`${left} >= ${right}`;
    case "lt":
      return sql`${left} < ${right}`;
    case "le":
      return sql`${left} <= ${right}`;
    default:
      throw invalid(`Unknown operator "${op}".`);
  }
}

interface Scope {
  columns: FilterColumns;
  urns: readonly string[];
  /** Inside `emails[…]`: the element's sub-attributes. */
  element?: MultiColumn;
}

function condition(filter: Filter, scope: Scope): SQL {
  switch (filter.op) {
    case "and":
    case "or": {
      const parts = filter.filters.map((f) => condition(f, scope));
      const joined = filter.op === "and" ? and(...parts) : or(...parts);
      return joined ?? sql`true`;
    }
    case "not":
      return not(condition(filter.filter, scope));
    case "[]": {
      const column = scope.columns[attributeName(filter.attrPath, scope.urns)];
      if (column?.kind !== "multi" || scope.element) throw invalid(`"${filter.attrPath}" takes no [filter].`);
      return column.exists(condition(filter.valFilter, { ...scope, element: column }));
    }
    default: {
      const name = attributeName(filter.attrPath, scope.urns);
      const value = filter.op === "pr" ? undefined : filter.compValue;
      if (scope.element) {
        const sub = scope.element.sub(name);
        if (!sub) throw invalid(`Unknown sub-attribute "${filter.attrPath}".`);
        return compare(sub, filter.op, value);
      }
      const whole = scope.columns[name];
      if (whole?.kind === "scalar") return compare(whole, filter.op, value);
      const [head = "", subName] = name.split(".", 2);
      const column = whole ?? scope.columns[head];
      if (column?.kind !== "multi") throw invalid(`Filtering on "${filter.attrPath}" is not supported.`);
      const sub = column.sub(subName ?? column.primary);
      if (!sub) throw invalid(`Unknown sub-attribute "${filter.attrPath}".`);
      return column.exists(compare(sub, filter.op, value));
    }
  }
}

/** The SQL condition of a SCIM `filter` over `columns`; 400 `invalidFilter` for one it cannot run. */
export function filterCondition(text: string, columns: FilterColumns, urns: readonly string[]): SQL {
  if (text.length > 2000) throw invalid("The filter is too long.");
  let tree: Filter;
  try {
    tree = parse(text);
  } catch (error) {
    throw invalid(`The filter does not parse: ${(error as Error).message}`.slice(0, 300));
  }
  return condition(tree, { columns, urns });
}
