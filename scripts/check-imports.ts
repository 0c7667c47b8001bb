/**
 * The map of docs/architecture.md, enforced (`bun run imports:check`, part of `bun run check`). A part
 * is a folder directly under src/ (its subfolders included) or a file at the top of src/. The layer
 * block of docs/architecture.md lists every part once, top to bottom; this fails when
 * - a part of src/ is missing from the block, or the block names one that does not exist;
 * - a file value-imports a part on a line above its own (an upward import);
 * - parts import each other in a circle (parts on one line may import each other, never both ways);
 * - a file outside src/runtime/ and the entry files (the block's first line) touches a runtime
 *   global (`Bun`, `Deno`) or imports `bun`/`bun:*`.
 * Type-only imports do not count: they vanish at run time, and every domain function names `Deps`,
 * the type the composition root (src/deps.ts) assembles from the domain modules.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

const root = resolve(import.meta.dir, "../src");
const mapFile = resolve(import.meta.dir, "../docs/architecture.md");
const RUNTIME_PART = "runtime/";

/** A part is written as in the block: `http/` for a folder, `server.ts` for a file at the top. */
const partOf = (file: string): string => {
  const [first = "", ...rest] = relative(root, file).split("/");
  return rest.length > 0 ? `${first}/` : first;
};

interface Place {
  layer: string;
  /** The line of the block, from 0 at the top. */
  rank: number;
}

/** The layer block: the first fenced block under `## Layers`; a line is `[layer name]  part part …`. */
function readMap(): Map<string, Place> {
  const doc = readFileSync(mapFile, "utf8");
  const block = /^## Layers\n[\s\S]*?^```\n([\s\S]*?)^```/m.exec(doc)?.[1];
  if (!block) throw new Error("docs/architecture.md: no layer block (a fenced block under `## Layers`)");
  const places = new Map<string, Place>();
  let layer = "";
  let rank = 0;
  for (const line of block.split("\n").slice(1)) {
    const tokens = line.trim().split(/\s+/).filter(Boolean);
    const parts = tokens.filter((token) => /^[a-z0-9-]+(\/|\.ts)$/.test(token));
    if (parts.length === 0) continue;
    const name = tokens.slice(0, tokens.indexOf(parts[0] as string)).join(" ");
    if (name) layer = name;
    for (const part of parts) {
      if (places.has(part))
        throw new Error(`docs/architecture.md: ${part} is listed twice in the layer block`);
      places.set(part, { layer, rank });
    }
    rank++;
  }
  return places;
}

const files: string[] = [];
const walk = (dir: string) => {
  for (const entry of readdirSync(dir)) {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) walk(path);
    else if (/\.tsx?$/.test(path)) files.push(path);
  }
};
walk(root);

const places = readMap();
const problems: string[] = [];
const parts = new Set(files.map(partOf));
for (const part of parts)
  if (!places.has(part)) problems.push(`src/${part} is not in the layer block of docs/architecture.md`);
for (const part of places.keys())
  if (!existsSync(join(root, part)))
    problems.push(`docs/architecture.md's layer block names src/${part}, which does not exist`);
const entryFiles = new Set([...places].filter(([, place]) => place.rank === 0).map(([part]) => part));

/**
 * The transpiled code with the text of its string and template literals blanked, so that a word
 * in a message is not taken for code. The transpiler has already dropped comments and types.
 */
function codeOnly(js: string): string {
  let out = "";
  let quote: string | null = null;
  const templateDepth: number[] = [];
  let braces = 0;
  for (let i = 0; i < js.length; i++) {
    const ch = js[i] as string;
    if (quote) {
      if (ch === "\\") {
        i++;
        out += "  ";
        continue;
      }
      if (quote === "`" && ch === "$" && js[i + 1] === "{") {
        templateDepth.push(braces);
        quote = null;
        out += "${";
        i++;
        continue;
      }
      if (ch === quote) {
        quote = null;
        out += ch;
      } else out += ch === "\n" ? "\n" : " ";
      continue;
    }
    if (ch === "'" || ch === '"' || ch === "`") quote = ch;
    else if (ch === "/" && /[(,=:[!&|?{};+\-*%<>~^]\s*$|^\s*$|\breturn\s*$/.test(out.slice(-20))) {
      // a regular expression literal: skipped whole (its class may hold a quote)
      let j = i + 1;
      for (let inClass = false; j < js.length && (js[j] !== "/" || inClass); j++) {
        if (js[j] === "\\") j++;
        else if (js[j] === "[") inClass = true;
        else if (js[j] === "]") inClass = false;
        else if (js[j] === "\n") break;
      }
      out += " ".repeat(j - i + 1);
      i = j;
      continue;
    } else if (ch === "{") braces++;
    else if (ch === "}") {
      if (templateDepth.length > 0 && templateDepth[templateDepth.length - 1] === braces) {
        templateDepth.pop();
        quote = "`";
      } else braces--;
    }
    out += ch;
  }
  return out;
}

const transpiler = new Bun.Transpiler({ loader: "ts" });
const RUNTIME_GLOBAL = /\b(Bun|Deno)\b/;
const edges = new Map<string, Map<string, string>>();
for (const file of files) {
  const source = readFileSync(file, "utf8");
  const from = partOf(file);
  const where = relative(resolve(root, ".."), file);
  const fromPlace = places.get(from);
  const runtimeAllowed = from === RUNTIME_PART || entryFiles.has(from);
  for (const { path: spec } of transpiler.scanImports(source)) {
    if (!runtimeAllowed && (spec === "bun" || spec.startsWith("bun:")))
      problems.push(`${where} imports "${spec}": runtime specifics live in src/runtime/ (or an entry file)`);
    if (!spec.startsWith(".")) continue;
    const to = partOf(resolve(dirname(file), spec));
    if (to === from) continue;
    const toPlace = places.get(to);
    if (fromPlace && toPlace && toPlace.rank < fromPlace.rank)
      problems.push(
        `${where} imports ${spec}: an upward import (${from}, ${fromPlace.layer}, sits below ${to}, ${toPlace.layer}, in the layer block of docs/architecture.md)`,
      );
    const targets = edges.get(from) ?? new Map<string, string>();
    edges.set(from, targets);
    if (!targets.has(to)) targets.set(to, `${where} → ${spec}`);
  }
  if (!runtimeAllowed) {
    const lines = codeOnly(transpiler.transformSync(source)).split("\n");
    const line = lines.find((text) => RUNTIME_GLOBAL.test(text));
    if (line)
      problems.push(
        `${where} uses the runtime global ${RUNTIME_GLOBAL.exec(line)?.[1]} (\`${line.trim().slice(0, 60)}\`): put it behind an adapter in src/runtime/`,
      );
  }
}

// every elementary circle is found through its strongly connected component (Tarjan)
const index = new Map<string, number>();
const low = new Map<string, number>();
const stack: string[] = [];
const onStack = new Set<string>();
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
  if (low.get(node) !== index.get(node)) return;
  const component: string[] = [];
  let member: string | undefined;
  do {
    member = stack.pop() as string;
    onStack.delete(member);
    component.push(member);
  } while (member !== node);
  if (component.length < 2) return;
  const members = new Set(component);
  const examples = component.flatMap((from) =>
    [...(edges.get(from) ?? [])]
      .filter(([to]) => members.has(to))
      .map(([to, e]) => `\n  ${from} → ${to}: ${e}`),
  );
  problems.push(`a circle between ${component.sort().join(", ")}:${examples.join("")}`);
};
for (const node of edges.keys()) if (!index.has(node)) connect(node);

if (problems.length === 0) {
  console.log(
    `imports: the ${parts.size} parts of src/ follow the layers of docs/architecture.md (no upward import, no circle, runtime globals only in src/runtime/ and the entry files)`,
  );
  process.exit(0);
}
for (const problem of problems) console.error(`imports: ${problem}`);
process.exit(1);
