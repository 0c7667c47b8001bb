// `bun run docs:errors`: regenerates docs/errors.md from src/http/problem-types.ts.
import { writeFileSync } from "node:fs";
import { resolve } from "node:path";
import { renderErrorsReference } from "../src/http/routes/problems.ts";

const path = resolve(import.meta.dir, "../docs/errors.md");
writeFileSync(path, renderErrorsReference());
console.log(`wrote ${path}`);
