import { existsSync } from "node:fs";
import { type Browser, chromium, type Page } from "playwright-core";

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

/**
 * What the page's console says the Content Security Policy refused, and (with `pageErrors`) the
 * page's uncaught errors: a list that stays empty while the page behaves.
 */
export function cspComplaints(page: Page, options: { pageErrors?: boolean } = {}): string[] {
  const complaints: string[] = [];
  page.on("console", (message) => {
    if (/Content Security Policy|Refused to/i.test(message.text())) complaints.push(message.text());
  });
  if (options.pageErrors) page.on("pageerror", (error) => complaints.push(error.message));
  return complaints;
}

/** Signs `email` in on the console's sign-in page at `base` and waits for the console's home. */
export async function signInToConsole(
  page: Page,
  base: string,
  email: string,
  password: string,
): Promise<void> {
  await page.goto(`${base}/console/sign-in`);
  await page.fill("#email", email);
  await page.fill("#password", password);
  await Promise.all([page.waitForURL(`${base}/console`), page.click("main button[type=submit]")]);
}
