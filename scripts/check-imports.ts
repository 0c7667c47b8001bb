/**
 * Fails when folders of src/ import each other in a circle (docs/architecture.md). A node is a
 * folder directly under src/ (its subfolders included), or a file at the top of src/. Type-only
 * imports do not count: they vanish at run time, and every domain function names `Deps`, the type
 * the composition root (src/deps.ts) assembles from the domain modules.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

const root = resolve(import.meta.dir, "../src");
const files: string[] = [];
const walk = (dir: string) => {
  for (const entry of readdirSync(dir)) {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) walk(path);
    else if (/\.tsx?$/.test(path)) files.push(path);
  }
};
walk(root);

const nodeOf = (file: string) => relative(root, file).split("/")[0] ?? file;
/** Value imports and re-exports: `import type`/`export type` and all-`type` name lists are skipped. */
const IMPORT =
  /^\s*(import|export)\s+(type\s+)?([^"';]*?)\s*from\s*["'](\.[^"']+)["']|import\(\s*["'](\.[^"']+)["']\s*\)/gm;
const edges = new Map<string, Map<string, string>>();
for (const file of files) {
  const source = readFileSync(file, "utf8");
  for (const match of source.matchAll(IMPORT)) {
    const [, , typeOnly, names = "", staticSpec, dynamicSpec] = match;
    if (typeOnly) continue;
    const list = names.match(/^\{([\s\S]*)\}$/)?.[1];
    if (list?.split(",").every((name) => !name.trim() || name.trim().startsWith("type "))) continue;
    const spec = staticSpec ?? dynamicSpec;
    if (!spec) continue;
    const from = nodeOf(file);
    const to = nodeOf(resolve(dirname(file), spec));
    if (from === to) continue;
    const targets = edges.get(from) ?? new Map<string, string>();
    edges.set(from, targets);
    if (!targets.has(to)) targets.set(to, `${relative(root, file)} → ${spec}`);
  }
}

// every elementary circle is found through its strongly connected component (Tarjan)
const index = new Map<string, number>();
const low = new Map<string, number>();
const stack: string[] = [];
const onStack = new Set<string>();
const components: string[][] = [];
let counter = 0;
const connect = (node: string) => {
  index.set(node, counter);
  low.set(node, counter++);
  stack.push(node);
  onStack.add(node);
  for (const next of edges.get(node)?.keys() ?? []) {
    if (!index.has(next)) {
      connect(next);
      low.set(node, Math.min(low.get(node) ?? 0, low.get(next) ?? 0));
    } else if (onStack.has(next)) low.set(node, Math.min(low.get(node) ?? 0, index.get(next) ?? 0));
  }
  if (low.get(node) === index.get(node)) {
    const component: string[] = [];
    let member: string | undefined;
    do {
      member = stack.pop() as string;
      onStack.delete(member);
      component.push(member);
    } while (member !== node);
    if (component.length > 1) components.push(component);
  }
};
for (const node of edges.keys()) if (!index.has(node)) connect(node);

if (components.length === 0) {
  console.log(`imports: no circles between the ${new Set(files.map(nodeOf)).size} parts of src/`);
  process.exit(0);
}
for (const component of components) {
  console.error(`imports: a circle between ${component.sort().join(", ")}:`);
  const members = new Set(component);
  for (const from of component)
    for (const [to, example] of edges.get(from) ?? [])
      if (members.has(to)) console.error(`  ${from} → ${to}: ${example}`);
}
process.exit(1);
