import { existsSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "./process.ts";

/**
 * The Deno binary the smoke test uses: `PLINTH_DENO`, else `deno` on PATH, else the copy
 * scripts/setup.sh installs from the npm registry into .cache/deno.
 */
export function denoBinary(): string {
  const configured = process.env.PLINTH_DENO;
  if (configured) return configured;
  const onPath = Bun.which("deno");
  if (onPath) return onPath;
  const cached = join(ROOT, ".cache", "deno", "node_modules", ".bin", "deno");
  if (existsSync(cached)) return cached;
  throw new Error("Deno not found: run scripts/setup.sh (it installs Deno from the npm registry)");
}
