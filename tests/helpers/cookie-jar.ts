/** A browser's cookie jar, reduced to what the console sets: `take` a response's cookies, send `header()`. */
export class Jar {
  readonly cookies = new Map<string, string>();
  take(response: Response): Response {
    for (const line of response.headers.getSetCookie()) {
      const [pair = ""] = line.split(";");
      const at = pair.indexOf("=");
      const name = pair.slice(0, at);
      const value = pair.slice(at + 1);
      // a cookie cleared (Max-Age=0, or set empty) leaves the jar
      if (/max-age=0/i.test(line) || value === "") this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
    return response;
  }
  header(): string {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join("; ");
  }
}
