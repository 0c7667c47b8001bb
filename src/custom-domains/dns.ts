/** DNS record types the verifier asks for (RFC 1035 numbers, as DoH JSON answers carry them). */
export const DNS_TYPES = { CNAME: 5, TXT: 16 } as const;
export type DnsType = keyof typeof DNS_TYPES;

export type DnsAnswer =
  /** NOERROR: the data of the answers of the asked type (TXT chunks joined, names without the final dot). */
  | { kind: "ok"; records: string[] }
  /** The name does not exist (Status 3). */
  | { kind: "nxdomain" }
  /** The resolver answered with another failure (SERVFAIL = 2, REFUSED = 5, ...), or not at all. */
  | { kind: "error"; detail: string };

export interface DnsResolver {
  query(name: string, type: DnsType): Promise<DnsAnswer>;
}

const RCODES: Record<number, string> = { 1: "FORMERR", 2: "SERVFAIL", 4: "NOTIMP", 5: "REFUSED" };

/**
 * TXT `data` as DoH JSON resolvers give it: one or more quoted character-strings
 * (`"\"abc\" \"def\""`), joined into one value, with `\"`, `\\` and `\DDD` escapes undone.
 * Unquoted data (some resolvers) is taken as it is.
 */
export function parseTxtData(data: string): string {
  const text = data.trim();
  if (!text.startsWith('"')) return text;
  let out = "";
  let inQuotes = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i] as string;
    if (!inQuotes) {
      if (ch === '"') inQuotes = true;
      continue; // whitespace between chunks
    }
    if (ch === '"') {
      inQuotes = false;
    } else if (ch === "\\" && i + 1 < text.length) {
      const digits = text.slice(i + 1, i + 4);
      if (/^[0-9]{3}$/.test(digits)) {
        out += String.fromCharCode(Number(digits));
        i += 3;
      } else {
        out += text[i + 1];
        i += 1;
      }
    } else out += ch;
  }
  return out;
}

const stripDot = (name: string) => (name.endsWith(".") ? name.slice(0, -1) : name).toLowerCase();

/**
 * A DNS-over-HTTPS JSON client (`GET <endpoint>?name=&type=`, `accept: application/dns-json`,
 * as Cloudflare's and Google's resolvers speak it). Never throws: a timeout, a refused
 * connection, a non-200 or a body that is not DoH JSON is an `error` answer.
 */
export function createDohResolver(options: {
  endpoint: string;
  timeoutMs: number;
  fetch?: typeof fetch;
}): DnsResolver {
  const doFetch = options.fetch ?? fetch;
  return {
    async query(name, type) {
      const url = new URL(options.endpoint);
      url.searchParams.set("name", name);
      url.searchParams.set("type", type);
      let body: unknown;
      try {
        const response = await doFetch(url, {
          headers: { accept: "application/dns-json" },
          signal: AbortSignal.timeout(options.timeoutMs),
          redirect: "error",
        });
        if (response.status !== 200) {
          await response.body?.cancel();
          return { kind: "error", detail: `resolver answered HTTP ${response.status}` };
        }
        body = await response.json();
      } catch (error) {
        const timedOut =
          error instanceof Error && (error.name === "TimeoutError" || error.name === "AbortError");
        return {
          kind: "error",
          detail: timedOut ? `resolver timed out after ${options.timeoutMs} ms` : "resolver unreachable",
        };
      }
      if (
        typeof body !== "object" ||
        body === null ||
        typeof (body as { Status?: unknown }).Status !== "number"
      )
        return { kind: "error", detail: "resolver answer is not DNS JSON" };
      const { Status, Answer } = body as { Status: number; Answer?: unknown };
      if (Status === 3) return { kind: "nxdomain" };
      if (Status !== 0)
        return { kind: "error", detail: `resolver answered ${RCODES[Status] ?? `rcode ${Status}`}` };
      const wanted = DNS_TYPES[type];
      const records: string[] = [];
      for (const answer of Array.isArray(Answer) ? Answer : []) {
        const a = answer as { type?: unknown; data?: unknown };
        if (a.type !== wanted || typeof a.data !== "string") continue;
        records.push(type === "TXT" ? parseTxtData(a.data) : stripDot(a.data.trim()));
      }
      return { kind: "ok", records };
    },
  };
}
