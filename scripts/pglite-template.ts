// `bun scripts/pglite-template.ts` (run by scripts/setup.sh): makes the migrated PGlite template a new
// embedded database is copied from (src/db/pglite-template.ts) when it is absent; quick when present.
import { ensureTemplate, templateDir } from "../src/db/pglite-template.ts";

const dir = templateDir();
const started = performance.now();
if (await ensureTemplate(dir))
  process.stderr.write(
    `setup: made the embedded database template ${dir} (${Math.round(performance.now() - started)} ms)\n`,
  );
