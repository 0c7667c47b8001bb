import type { ZxcvbnFactory } from "@zxcvbn-ts/core";
import { hashArgon2id, verifyArgon2id } from "../runtime/argon2id.ts";

/** OWASP's argon2id floor: 19 MiB, 2 passes, 1 lane. PHC strings, portable between Bun and Deno. */
const MEMORY_KIB = 19_456;
const ITERATIONS = 2;

export const MIN_PASSWORD_LENGTH = 12;

/**
 * The least zxcvbn score (0-4) a new password needs: 3, "safely unguessable", which refuses
 * repeats, keyboard walks, common passwords and dictionary words with digits (`password1234`,
 * `P@ssw0rd2026!`), and anything built from the account's own e-mail or name.
 */
export const MIN_PASSWORD_SCORE = 3;

let estimator: Promise<ZxcvbnFactory> | undefined;

/** zxcvbn with its common dictionaries, loaded on first use: they cost ~30 ms and ~26 MB. */
function loadEstimator(): Promise<ZxcvbnFactory> {
  estimator ??= Promise.all([import("@zxcvbn-ts/core"), import("@zxcvbn-ts/language-common")]).then(
    ([core, common]) =>
      new core.ZxcvbnFactory({ dictionary: { ...common.dictionary }, graphs: common.adjacencyGraphs }),
  );
  return estimator;
}

const lettersOnly = (text: string): string => text.toLowerCase().replace(/[^\p{L}]/gu, "");

/**
 * Whether the letters of `password` (digits and symbols stripped, lower-cased: its "main part") are
 * made only of the account's own words: the e-mail's local part and its pieces, the domain's labels,
 * the name's parts, the product's name. `adminexample1` for admin@example.com, `owneracme123` for
 * owner@acme.test and `Jane.Doe!2026` for Jane Doe are refused whatever zxcvbn scores them.
 */
function builtFromAccount(password: string, context: { email?: string; name?: string }): boolean {
  const main = lettersOnly(password);
  if (!main) return false;
  const words = new Set<string>(["plinth"]);
  const add = (part: string) => {
    const word = lettersOnly(part);
    if (word.length >= 2) words.add(word);
  };
  if (context.email) {
    const [local = "", domain = ""] = context.email.split("@");
    add(local);
    for (const piece of local.split(/[.+_-]/)) add(piece);
    for (const label of domain.split(".")) add(label);
  }
  if (context.name) {
    add(context.name);
    for (const part of context.name.split(/[\s.,'-]+/)) add(part);
  }
  // can `main` be cut into a sequence of those words? (word break over at most 1,024 characters)
  const reachable = new Array<boolean>(main.length + 1).fill(false);
  reachable[0] = true;
  for (let end = 1; end <= main.length; end++) {
    for (const word of words) {
      if (word.length <= end && reachable[end - word.length] && main.startsWith(word, end - word.length)) {
        reachable[end] = true;
        break;
      }
    }
  }
  return reachable[main.length] === true;
}

/**
 * Why a new password cannot be used, or null: at least `MIN_PASSWORD_LENGTH` characters and a
 * letters that are not just the account's own words (`builtFromAccount`), and a
 * zxcvbn score of at least `MIN_PASSWORD_SCORE`, judged with the account's e-mail and name (and
 * the product's name) as words an attacker would try first. The message never repeats the password.
 * The dictionaries load on the first check (processes that never set a password never load them);
 * a check takes a few milliseconds.
 */
export async function passwordProblem(
  password: string,
  context: { email?: string; name?: string } = {},
): Promise<string | null> {
  if (password.length < MIN_PASSWORD_LENGTH) return `must be at least ${MIN_PASSWORD_LENGTH} characters`;
  if (builtFromAccount(password, context))
    return "is built from the account's e-mail address or name: choose words that are not about you";
  const zxcvbn = await loadEstimator();
  const words = ["plinth", "admin"];
  if (context.email) words.push(context.email, ...context.email.split(/[@.+_-]/));
  if (context.name) words.push(context.name, ...context.name.split(/\s+/));
  // zxcvbn's matching grows fast with the length: it judges the first 100 characters
  if (zxcvbn.check(password.slice(0, 100), words.filter(Boolean)).score < MIN_PASSWORD_SCORE)
    return "is too easy to guess: use a long passphrase or a generated password";
  return null;
}

export function hashPassword(password: string): Promise<string> {
  return hashArgon2id(password, { memoryKib: MEMORY_KIB, iterations: ITERATIONS });
}

export async function verifyPassword(password: string, hash: string): Promise<boolean> {
  try {
    return await verifyArgon2id(password, hash);
  } catch {
    return false;
  }
}
