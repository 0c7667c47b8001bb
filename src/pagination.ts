/**
 * The one list shape: `{ items, nextCursor }`, where `nextCursor` (null on the last page) is an
 * opaque string the client passes back as `cursor`. A cursor is a keyset position encoded as
 * base64url JSON and checked against the list's own schema when it comes back: anything else is a
 * 400 naming `cursor`, never a 500 or an empty page.
 */
import { z } from "zod";
import { AppError } from "./errors.ts";

/** A page of a list. */
export interface Page<T> {
  items: T[];
  nextCursor: string | null;
}

/** The request side of a paged list. */
export interface PageRequest {
  limit: number;
  cursor?: string;
}

export interface CursorCodec<P> {
  encode(position: P): string;
  /** The position, or throws `validation_failed` naming `cursor`. */
  decode(cursor: string): P;
  /** `decode` when a cursor was given. */
  decodeOptional(cursor: string | undefined): P | undefined;
}

/**
 * What every cursor looks like: base64url (no padding) of a JSON object, so it starts with `eyJ`
 * (`{"`), at least 10 characters (`{"a":1}`) and at most 4,096 (a storage key of 1,024 UTF-8 bytes
 * fits). The document states it as the `cursor` parameter's pattern; the codec checks it first.
 */
export const CURSOR_PATTERN = "^eyJ[A-Za-z0-9_-]{7,4093}$";
const CURSOR = new RegExp(CURSOR_PATTERN);

/** The 400 of a cursor no list of ours returned. */
export const invalidCursor = () =>
  new AppError("validation_failed", "The request is not valid.", {
    fields: [{ path: "cursor", message: "not a cursor returned by this endpoint" }],
  });

/** The codec of one list's positions (a JSON object), checked by `schema` on the way back. */
export function cursorCodec<S extends z.ZodObject>(schema: S): CursorCodec<z.output<S>> {
  const decode = (cursor: string): z.output<S> => {
    if (!CURSOR.test(cursor)) throw invalidCursor();
    let parsed: unknown;
    try {
      parsed = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
    } catch {
      throw invalidCursor();
    }
    const result = schema.safeParse(parsed);
    if (!result.success) throw invalidCursor();
    return result.data;
  };
  return {
    encode: (position) => Buffer.from(JSON.stringify(position), "utf8").toString("base64url"),
    decode,
    decodeOptional: (cursor) => (cursor === undefined ? undefined : decode(cursor)),
  };
}

/**
 * The page of `rows` fetched with `limit + 1`: the first `limit` rows, and the cursor of the last
 * of them when there was one more.
 */
export function pageOf<R, T, P>(
  rows: R[],
  limit: number,
  view: (row: R) => T,
  position: (row: R) => P,
  codec: CursorCodec<P>,
): Page<T> {
  const more = rows.length > limit;
  const kept = more ? rows.slice(0, limit) : rows;
  const last = kept[kept.length - 1];
  return {
    items: kept.map(view),
    nextCursor: more && last !== undefined ? codec.encode(position(last)) : null,
  };
}

/**
 * The keyset position of a list in creation order: the last row's creation time as PostgreSQL's
 * exact text (`created_at::text`, full precision, compared back as a timestamptz) and its id.
 */
export const createdAtPosition = z.object({
  createdAt: z.string().regex(/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{1,6})?[+-]\d{2}(?::\d{2})?$/),
  id: z.guid(),
});

/**
 * `pageOf` for a list in creation order (db/keyset.ts `creationOrder`): each row carries its
 * `position` (created_at's exact text), which positions the cursor and which the view never sees.
 */
export function pageByCreation<R extends { position: string; id: string }, T>(
  rows: R[],
  limit: number,
  view: (row: Omit<R, "position">) => T,
  codec: CursorCodec<z.output<typeof createdAtPosition>>,
): Page<T> {
  return pageOf(
    rows,
    limit,
    ({ position: _position, ...row }) => view(row),
    (row) => ({ createdAt: row.position, id: row.id }),
    codec,
  );
}

/** The keyset position of a list in id order (a bigint identity): the last row's id. */
export const idCursor = cursorCodec(z.object({ id: z.number().int().positive() }));

/** `pageOf` for a list in id order whose rows are its items, positioned by `idCursor`. */
export function pageById<R extends { id: number }>(rows: R[], limit: number): Page<R> {
  return pageOf(
    rows,
    limit,
    (row) => row,
    (row) => ({ id: row.id }),
    idCursor,
  );
}
