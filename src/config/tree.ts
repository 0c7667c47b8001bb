import { z } from "zod";
import { configSchema } from "./schema.ts";

/** A node of the JSON Schema that zod derives from the config schema: the map of every key. */
export interface SchemaNode {
  type?: string | string[];
  properties?: Record<string, SchemaNode>;
  items?: SchemaNode;
  default?: unknown;
  description?: string;
  secret?: boolean;
  enum?: unknown[];
  format?: string;
  minimum?: number;
  maximum?: number;
}

export const schemaTree = z.toJSONSchema(configSchema, { io: "input" }) as SchemaNode;

export function typesOf(node: SchemaNode): string[] {
  if (node.type === undefined) return [];
  return Array.isArray(node.type) ? node.type : [node.type];
}

export function describeType(node: SchemaNode): string {
  const types = typesOf(node).filter((t) => t !== "null");
  if (node.enum) return `one of ${node.enum.map(String).join(", ")}`;
  if (types.includes("array")) {
    const item = node.items ? describeType(node.items) : "a value";
    const plural =
      { "a string": "strings", "a section": "sections", "an integer": "integers" }[item] ??
      `values (${item})`;
    return `a list of ${plural}`;
  }
  if (types.includes("object")) return "a section";
  if (types.includes("integer")) {
    const low = node.minimum !== undefined ? ` ≥ ${node.minimum}` : "";
    // zod's .int() says ≤ MAX_SAFE_INTEGER: no bound worth printing
    const high =
      node.maximum !== undefined && node.maximum < Number.MAX_SAFE_INTEGER ? ` ≤ ${node.maximum}` : "";
    return `an integer${low}${low && high ? " and" : ""}${high}`;
  }
  if (types.includes("number")) {
    const low = node.minimum !== undefined ? ` ≥ ${node.minimum}` : "";
    const high = node.maximum !== undefined ? ` ≤ ${node.maximum}` : "";
    return `a number${low}${low && high ? " and" : ""}${high}`;
  }
  if (types.includes("boolean")) return "true or false";
  if (node.format === "uri") return "a URL";
  return "a string";
}

/** Finds the schema node for a key path such as ["Security", "Jwt", "VerificationKeys", 0, "KeyId"]. */
export function nodeAt(path: readonly PropertyKey[]): SchemaNode | undefined {
  let node: SchemaNode | undefined = schemaTree;
  for (const segment of path) {
    if (!node) return undefined;
    node = typeof segment === "number" ? node.items : node.properties?.[String(segment)];
  }
  return node;
}

export interface LeafKey {
  key: string;
  node: SchemaNode;
}

/** Every leaf key (`Section:Key`, arrays as `Key:N` / `Key:N:Field`), in schema order. */
export function leafKeys(node: SchemaNode = schemaTree, prefix = ""): LeafKey[] {
  const out: LeafKey[] = [];
  for (const [name, child] of Object.entries(node.properties ?? {})) {
    const key = prefix ? `${prefix}:${name}` : name;
    if (typesOf(child).includes("object") && child.properties) out.push(...leafKeys(child, key));
    else if (typesOf(child).includes("array") && child.items?.properties) {
      out.push({ key, node: child });
      out.push(...leafKeys(child.items, `${key}:N`));
    } else out.push({ key, node: child });
  }
  return out;
}

/** Keys whose values are secrets (never printed). */
export const secretKeys: string[] = leafKeys()
  .filter((leaf) => leaf.node.secret)
  .map((leaf) => leaf.key);
