import { existsSync } from "node:fs";
import { type Browser, chromium } from "playwright-core";

/** Debian's Chromium, installed by `sh scripts/setup.sh --services`. */
export const CHROMIUM = "/usr/bin/chromium";

/**
 * Debian's Chromium, headless, with the flags that work on this kind of machine (FIELD-NOTES):
 * no sandbox, GPU, QUIC or background traffic; `extraArgs` after them. Fails naming the fix when
 * Chromium is missing.
 */
export async function launchChromium(extraArgs: string[] = []): Promise<Browser> {
  if (!existsSync(CHROMIUM))
    throw new Error(`Chromium is missing at ${CHROMIUM}: install it with \`sh scripts/setup.sh --services\``);
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      ...extraArgs,
    ],
  });
}
