/** `https://App.Example.com:443/` → `https://app.example.com`; anything unparsable stays as it is. */
export function normaliseOrigin(value: string): string {
  try {
    return new URL(value).origin;
  } catch {
    return value;
  }
}
