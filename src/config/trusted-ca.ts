import { X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import type { ConfigProblem } from "./config-error.ts";

const PEM_BLOCK = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

/**
 * `Webhooks:TrustedCaFile`: the PEM certificates in the file, each parsed, or a problem naming the
 * key when the file cannot be read or holds no certificate. Undefined when the key is unset.
 */
export function readTrustedCa(
  path: string | undefined,
  problems: ConfigProblem[],
  key = "Webhooks:TrustedCaFile",
): string[] | undefined {
  if (!path) return undefined;
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    const code = (error as { code?: string }).code ?? "unreadable";
    problems.push({ key, problem: `the file ${path} cannot be read (${code})` });
    return undefined;
  }
  const blocks = text.match(PEM_BLOCK) ?? [];
  if (blocks.length === 0) {
    problems.push({ key, problem: `the file ${path} holds no PEM certificate` });
    return undefined;
  }
  for (const [index, block] of blocks.entries()) {
    try {
      new X509Certificate(block);
    } catch {
      problems.push({ key, problem: `certificate ${index + 1} in ${path} is not a valid X.509 certificate` });
      return undefined;
    }
  }
  return blocks;
}
