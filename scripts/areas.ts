/**
 * The list of areas, src/http/areas.ts, from the `defineArea(…)` declarations (src/http/area.ts):
 * - `bun scripts/areas.ts generate` (`bun run areas:generate`) writes it: the areas it lists keep
 *   their order (the order the app mounts them in), a new one is added at the end, a gone one leaves;
 * - `bun scripts/areas.ts check` (`bun run areas:check`, part of `bun run check`) exits 1, saying
 *   what to do, when the list is out of date, when a router of src/http/routes/ belongs to no area
 *   (so nothing would mount it), when two areas share a name, or when a console page is declared
 *   outside an area's declaration (the console mounts and lists only the pages the areas declare),
 *   or when an audit action is declared outside its area: twice, in a file that is no area's, or in
 *   the trail's own list (src/audit/actions.ts) with the prefix of an area's actions.
 */
import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

const root = resolve(import.meta.dir, "..");
const httpDir = join(root, "src/http");
const LIST = join(httpDir, "areas.ts");
/** Routers app.ts mounts itself, ahead of every area: the probes before CORS, the docs page after. */
const MOUNTED_BY_APP = new Set(["healthRoutes", "docsRoutes"]);
const DECLARATION = /^export const (\w+) = defineArea\(\{[\s\S]*?routes: \[([^\]]*)\]/gm;
const ROUTER = /^export function (\w+Routes)\(/gm;
/** A console page (src/http/console/console-page.ts) written out: its path and who sees it. */
const CONSOLE_PAGE = /\bpath:\s*"\/console[^"]*",[^}]*\bseenBy:/;

interface Declared {
  variable: string;
  /** The module path as src/http/areas.ts imports it. */
  from: string;
  routers: string[];
}

function sourcesOf(dir: string): string[] {
  return readdirSync(dir).flatMap((entry) => {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) return sourcesOf(path);
    return path.endsWith(".ts") && path !== LIST ? [path] : [];
  });
}

function declarations(): Declared[] {
  return sourcesOf(httpDir).flatMap((file) =>
    [...readFileSync(file, "utf8").matchAll(DECLARATION)].map((match) => ({
      variable: match[1] as string,
      from: `./${relative(httpDir, file)}`,
      routers: (match[2] as string)
        .split(",")
        .map((name) => name.trim())
        .filter(Boolean),
    })),
  );
}

/** The areas in the order the list has them now: kept; new ones follow, by file and name. */
function ordered(declared: Declared[]): Declared[] {
  const listed = (() => {
    try {
      const body =
        /export const AREAS = \[([\s\S]*?)\] as const;/.exec(readFileSync(LIST, "utf8"))?.[1] ?? "";
      return body
        .split(",")
        .map((name) => name.trim())
        .filter(Boolean);
    } catch {
      return [];
    }
  })();
  const rank = (area: Declared) => {
    const at = listed.indexOf(area.variable);
    return at < 0 ? Number.MAX_SAFE_INTEGER : at;
  };
  return [...declared].sort(
    (a, b) => rank(a) - rank(b) || a.from.localeCompare(b.from) || a.variable.localeCompare(b.variable),
  );
}

function render(areas: Declared[]): string {
  const byModule = new Map<string, string[]>();
  for (const area of areas) byModule.set(area.from, [...(byModule.get(area.from) ?? []), area.variable]);
  const imports = [...byModule]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([from, names]) => `import { ${names.sort().join(", ")} } from "${from}";`);
  const text = `// Generated from the defineArea(…) declarations of src/http/ by \`bun run areas:generate\`; do not edit by hand.
${imports.join("\n")}

/** Every area (src/http/area.ts), in the order the app mounts them: a new one goes at the end. */
export const AREAS = [${areas.map((area) => area.variable).join(", ")}] as const;
`;
  // Biome's formatting and import order, so that \`bun run lint\` agrees with the generated text
  const formatted = spawnSync("bunx", ["biome", "check", "--write", `--stdin-file-path=${LIST}`], {
    cwd: root,
    input: text,
    encoding: "utf8",
  });
  if (formatted.status !== 0) throw new Error(`biome refused the generated list: ${formatted.stderr}`);
  return formatted.stdout;
}

/** The files an area's declaration imports (relative imports, resolved). */
function importedByAreas(): Set<string> {
  const imported = new Set<string>();
  for (const file of sourcesOf(httpDir)) {
    const text = readFileSync(file, "utf8");
    if (!/^export const \w+ = defineArea\(\{/m.test(text)) continue;
    for (const [, from] of text.matchAll(/from "(\.[^"]+)"/g))
      imported.add(resolve(dirname(file), from as string));
  }
  return imported;
}

/** Audit actions declared outside their area (read from the modules, once the list is up to date). */
async function actionProblems(): Promise<string[]> {
  const found: string[] = [];
  const imported = importedByAreas();
  const trail = join(root, "src/audit/actions.ts");
  for (const file of sourcesOf(join(root, "src"))) {
    const text = readFileSync(file, "utf8");
    if (!/\bwrittenBy:\s*"/.test(text) || file === trail || imported.has(file)) continue;
    if (/^export const \w+ = defineArea\(\{/m.test(text)) continue;
    found.push(
      `${relative(root, file)} describes audit actions that no area declares: put them in the auditActions of the area that records them (src/http/area.ts)`,
    );
  }
  const { TRAIL_AUDIT_ACTIONS } = await import("../src/audit/actions.ts");
  const { AREAS } = await import("../src/http/areas.ts");
  const owner = new Map<string, string>();
  const prefixOwner = new Map<string, string>();
  for (const area of AREAS)
    for (const action of Object.keys(area.auditActions)) {
      const other = owner.get(action);
      if (other)
        found.push(
          `the audit action ${action} is declared by two areas, ${other} and ${area.name}: keep it in one`,
        );
      owner.set(action, area.name);
      prefixOwner.set(action.split(".")[0] as string, area.name);
    }
  for (const action of TRAIL_AUDIT_ACTIONS as readonly string[]) {
    const area = owner.get(action) ?? prefixOwner.get(action.split(".")[0] as string);
    if (area)
      found.push(
        `src/audit/actions.ts declares the audit action ${action}, which belongs to an area (${area} declares ${action.split(".")[0]}.*): declare it in that area's auditActions`,
      );
  }
  return found;
}

function problems(declared: Declared[]): string[] {
  const found: string[] = [];
  const mounted = new Set(declared.flatMap((area) => area.routers));
  for (const file of sourcesOf(join(httpDir, "routes")))
    for (const [, router] of readFileSync(file, "utf8").matchAll(ROUTER))
      if (router && !mounted.has(router) && !MOUNTED_BY_APP.has(router))
        found.push(
          `${relative(root, file)} exports ${router}, which no area mounts: put it in the routes of the file's ` +
            "`export const <name>Area = defineArea({ name, routes: [...] })` (src/http/area.ts), then run `bun run areas:generate`",
        );
  for (const file of sourcesOf(httpDir)) {
    const text = readFileSync(file, "utf8");
    if (CONSOLE_PAGE.test(text) && !/^export const \w+ = defineArea\(\{/m.test(text))
      found.push(
        `${relative(root, file)} declares a console page outside an area: declare it in the consolePages of its area ` +
          "(`defineArea({ name, routes, consolePages: [{ path, title, seenBy, routes }] })`, src/http/area.ts); the console mounts only those",
      );
  }
  const seen = new Set<string>();
  for (const area of declared) {
    if (seen.has(area.variable)) found.push(`two areas are named ${area.variable}: rename one`);
    seen.add(area.variable);
  }
  if (readFileSync(LIST, "utf8") !== render(ordered(declared)))
    found.push(
      "src/http/areas.ts does not list every defineArea(…) declaration of src/http/ as declared: run `bun run areas:generate` (an area it does not list is neither mounted nor audited nor in the console)",
    );
  return found;
}

const command = process.argv[2];
if (command === "generate") {
  writeFileSync(LIST, render(ordered(declarations())));
  console.log(`wrote ${relative(root, LIST)}`);
} else if (command === "check") {
  const found = problems(declarations());
  if (found.length === 0) found.push(...(await actionProblems()));
  for (const problem of found) console.error(problem);
  process.exit(found.length > 0 ? 1 : 0);
} else {
  console.error("usage: bun scripts/areas.ts generate | check");
  process.exit(64);
}
