import type { Context } from "hono";
import type { Deps } from "../../deps.ts";
import { AppError } from "../../errors.ts";
import type { CursorCodec } from "../../pagination.ts";
import { CONSOLE_POLICY, type Html } from "./layout.ts";
import type { ConsoleEnv } from "./session.ts";

/** Form fields as strings (a file or a repeated field is not a value the console sends). */
export async function formOf(c: Context): Promise<Record<string, string>> {
  const body = await c.req.parseBody();
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(body)) if (typeof value === "string") out[key] = value;
  return out;
}

/** The statuses a console page answers with (the API's own status for a refusal shown in words). */
export type PageStatus = 200 | 400 | 401 | 402 | 403 | 404 | 409 | 422 | 429 | 503;

/** A console page: HTML with the console's policy, never cached (it shows live, private data). */
export function pageResponse(c: Context, body: Html, status: PageStatus = 200) {
  return c.html(body, status, { "content-security-policy": CONSOLE_POLICY, "cache-control": "no-store" });
}

/**
 * Every change made through the console, as one structured log line naming the actor: the
 * console's admin-action record (docs/console.md).
 */
export function consoleActed(
  deps: Pick<Deps, "logger">,
  c: Context<ConsoleEnv>,
  action: string,
  target: { type: string; id: string },
  details: Record<string, unknown> = {},
): void {
  const principal = c.get("principal");
  deps.logger.info("admin action", {
    via: "console",
    action,
    actorId: principal && principal.kind !== "apiKey" ? principal.userId : null,
    targetType: target.type,
    targetId: target.id,
    requestId: c.get("requestId"),
    ...details,
  });
}

/** A cursor from a page's address, or none when it is not one of the list's (an edited link shows the first page). */
export function consoleCursor<P>(codec: CursorCodec<P>, cursor: string | undefined): string | undefined {
  try {
    codec.decodeOptional(cursor);
    return cursor;
  } catch {
    return undefined;
  }
}

/** A `datetime-local` value (or ISO text) as a UTC instant; a 400 naming the field otherwise. */
export function instant(value: string | undefined, field: string): Date | undefined {
  if (!value) return undefined;
  const date = new Date(/[zZ]|[+-]\d\d:\d\d$/.test(value) ? value : `${value}Z`);
  if (Number.isNaN(date.getTime()))
    throw new AppError("validation_failed", `${field} is not a date and time.`, {
      fields: [{ path: field, message: "a date and time, e.g. 2026-11-23T10:00" }],
    });
  return date;
}
