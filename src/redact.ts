export const REDACTED = "[REDACTED]";

const SECRET_NAME = /pass(word)?|secret|token|pepper|private_?key|master_?key|api_?key|authorization|cookie/i;

/** Only hexadecimal digits and dashes (a UUID). */
const HEX_TEXT = /^[0-9A-Fa-f-]*$/;

export type Redactor = {
  /** Replaces every known secret value (and credentials in URLs, bearer tokens) in a string. */
  text(value: string): string;
  /** Deep copy with secret-named fields and secret values replaced. */
  value<T>(value: T): T;
  /** Does a field of this name hold a secret (password, token, key, …) whatever its value? */
  isSecretName(name: string): boolean;
};

/** Builds the redaction helper used by logs, errors and config dumps. */
export function createRedactor(secretValues: Iterable<string>): Redactor {
  const needles = new Set<string>();
  for (const secret of secretValues) {
    if (secret.length >= 4) needles.add(secret);
    // multi-line secrets (PEM keys): each substantial line alone is secret too
    for (const line of secret.split(/\r?\n/))
      if (line.trim().length >= 16 && !line.startsWith("-----")) needles.add(line.trim());
  }
  const ordered = [...needles].sort((a, b) => b.length - a.length);
  // one pass for all values; longest first, so a secret containing another is replaced whole
  const anySecret = ordered.length
    ? new RegExp(ordered.map((n) => n.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("|"), "g")
    : null;
  const shortest = ordered.at(-1)?.length ?? Number.POSITIVE_INFINITY;
  // hexadecimal digits and dashes alone (a request id, a UUID) hold none of the patterns below, nor
  // a configured secret unless one is made of those characters only: such text is returned as is
  const hexSecret = ordered.some((needle) => HEX_TEXT.test(needle));

  const text = (value: string): string => {
    if (!hexSecret && HEX_TEXT.test(value)) return value;
    let out = value;
    if (anySecret && out.length >= shortest) out = out.replace(anySecret, REDACTED);
    // the patterns only where they can match: most strings (paths, ids) skip both
    if (out.includes("://"))
      out = out.replace(/(\b[a-z][a-z0-9+.-]*:\/\/[^:/?#\s@]*:)[^@/\s]+@/gi, `$1${REDACTED}@`);
    // a tenant API key, anywhere (a URL, an error, a pasted header): its id part stays readable
    if (out.includes("plk_"))
      out = out.replace(
        /plk_([0-9A-Za-z]{12})(?:_[0-9A-Za-z]+|(?![0-9A-Za-z_-]))|plk_[0-9A-Za-z_-]{12,}/g,
        // the bare id part (a key's `prefix`, 16 characters) is no secret: kept whole
        (whole: string, id?: string) =>
          id ? (whole.length === 16 ? whole : `plk_${id}_${REDACTED}`) : `plk_${REDACTED}`,
      );
    // a tenant's SCIM token (docs/scim.md), likewise: its prefix stays readable
    if (out.includes("plscim_"))
      out = out.replace(/(plscim_[0-9A-Za-z]{12})_[0-9A-Za-z]+/g, `$1_${REDACTED}`);
    // a one-time link's token (`?token=…`, `&token=…`), wherever a link is logged
    if (out.includes("token=")) out = out.replace(/([?&]token=)[^&\s"'<>]+/gi, `$1${REDACTED}`);
    if (out.includes("Bearer") || out.includes("Basic")) {
      out = out.replace(/\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{8,}/g, `$1 ${REDACTED}`);
    }
    return out;
  };

  // log records repeat the same few field names: remember which ones name a secret
  const secretNames = new Map<string, boolean>();
  const isSecretName = (name: string): boolean => {
    let secret = secretNames.get(name);
    if (secret === undefined) {
      secret = SECRET_NAME.test(name);
      if (secretNames.size < 4096) secretNames.set(name, secret);
    }
    return secret;
  };

  const value = <T>(input: T): T => {
    let seen: WeakSet<object> | undefined;
    const walk = (node: unknown, name?: string): unknown => {
      if (typeof node === "string") return name && isSecretName(name) ? REDACTED : text(node);
      if (node === null || typeof node !== "object") return node;
      seen ??= new WeakSet<object>();
      if (seen.has(node)) return "[Circular]";
      seen.add(node);
      if (node instanceof Error) return describeError(node, text);
      if (node instanceof Date) return Number.isNaN(node.getTime()) ? null : node.toISOString();
      if (Array.isArray(node)) return node.map((item) => walk(item));
      const out: Record<string, unknown> = {};
      for (const key in node) {
        if (!Object.hasOwn(node, key)) continue;
        const child = (node as Record<string, unknown>)[key];
        out[key] =
          child !== null && child !== undefined && typeof child !== "boolean" && isSecretName(key)
            ? REDACTED
            : walk(child, key);
      }
      return out;
    };
    return walk(input) as T;
  };

  return { text, value, isSecretName };
}

export interface ErrorDescription {
  name: string;
  message: string;
  /** The driver's SQLSTATE, when a statement failed. */
  code?: string;
  /** A failed statement's text: `$n` placeholders, never the parameter values. */
  statement?: string;
  /** Stack frames only: the first line of `error.stack` repeats the message. */
  stack?: string;
}

/**
 * An error as logs may show it. A failed Drizzle query's message lists its parameter VALUES
 * ("Failed query: … params: …"): such an error is described by its driver cause's message, SQLSTATE
 * and statement text instead. Everything passes through `text` (the redactor's).
 */
export function describeError(
  error: unknown,
  text: (value: string) => string = (v) => v,
  options: { stack?: boolean } = {},
): ErrorDescription {
  if (!(error instanceof Error)) return { name: typeof error, message: text(String(error)) };
  const frames = options.stack
    ? error.stack
        ?.split("\n")
        .filter((line) => /^\s+at /.test(line))
        .join("\n")
    : undefined;
  const failed = error as Error & { query?: unknown; params?: unknown };
  if (typeof failed.query === "string" && "params" in failed) {
    const cause = error.cause as { message?: unknown; code?: unknown; name?: unknown } | undefined;
    let message = typeof cause?.message === "string" ? cause.message : "query failed";
    // data exceptions (SQLSTATE class 22) quote the offending value: `invalid input syntax … "value"`
    if (typeof cause?.code === "string" && cause.code.startsWith("22"))
      message = message.replace(/"[^"]*"/g, '"?"');
    return {
      name: typeof cause?.name === "string" ? cause.name : "QueryError",
      message: text(message),
      ...(typeof cause?.code === "string" ? { code: cause.code } : {}),
      statement: text(failed.query.replace(/\s+/g, " ").slice(0, 1_000)),
      ...(frames ? { stack: frames } : {}),
    };
  }
  return { name: error.name, message: text(error.message), ...(frames ? { stack: frames } : {}) };
}
