// `bun run docs:config`: regenerates docs/configuration.md from the config schema.
import { writeFileSync } from "node:fs";
import { resolve } from "node:path";
import { renderConfigReference } from "../src/config/reference.ts";

const path = resolve(import.meta.dir, "../docs/configuration.md");
writeFileSync(path, renderConfigReference());
console.log(`wrote ${path}`);
