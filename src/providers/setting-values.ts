/**
 * Provider setting values that carry a credential: a URL with userinfo (`https://user:pw@host`)
 * or a secret-looking query parameter (`api_key=`, `token=`, `secret=`, `password=`, `sig=`, …).
 * Such values belong in tenant secrets, referenced by name in `secretRefs`; they are refused with
 * the path of the value, never the value.
 */

/** Query parameter names that carry a secret (whole name, case-insensitive; `-`, `_` or `.` between words). */
const SECRET_PARAMETER =
  /^(?:.*(?:pass(?:word|phrase|wd)?|pwd|secret|token|credential|signature)|(?:.*[-_.])?(?:api|private|access|auth|signing|client|app|account|subscription)[-_.]?key|key|apikey|sig|auth|x-amz-(?:credential|security-token))$/i;

/** `scheme://userinfo@…`: anything before an `@` in the authority. */
const USERINFO = /^[a-z][a-z0-9+.-]*:\/\/[^/?#\s]*@/i;

/** Does this string carry a credential (see the top of the file)? */
export function carriesCredential(value: string): boolean {
  if (USERINFO.test(value.trim())) return true;
  const query = value.indexOf("?");
  // a query string, in a URL or on its own (`a=1&token=…`)
  const text = query >= 0 ? value.slice(query + 1) : value.includes("=") ? value : "";
  if (!text) return false;
  for (const pair of text.split("#", 1)[0]?.split(/[&;]/) ?? []) {
    const equals = pair.indexOf("=");
    if (equals <= 0) continue;
    let name = pair.slice(0, equals);
    try {
      name = decodeURIComponent(name.replaceAll("+", " "));
    } catch {
      // a malformed escape: the raw name is checked
    }
    if (SECRET_PARAMETER.test(name.trim())) return true;
  }
  return false;
}

/** Paths (`settings.webhook.url`, `settings.urls[1]`) of every string value that carries a credential. */
export function credentialValuePaths(settings: Record<string, unknown>): string[] {
  const found: string[] = [];
  // iterative walk: a deeply nested body must not exhaust the stack
  const pending: { path: string; value: unknown }[] = [{ path: "settings", value: settings }];
  for (let next = pending.pop(); next; next = pending.pop()) {
    const { path, value } = next;
    if (typeof value === "string") {
      if (carriesCredential(value)) found.push(path);
    } else if (Array.isArray(value))
      for (const [i, item] of value.entries()) pending.push({ path: `${path}[${i}]`, value: item });
    else if (value !== null && typeof value === "object")
      for (const [key, child] of Object.entries(value))
        pending.push({ path: `${path}.${key}`, value: child });
  }
  return found.sort();
}
