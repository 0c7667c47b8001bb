/**
 * The one check that a string is a UUID in its text form (8-4-4-4-12 hexadecimal digits). Ids from
 * clients and URLs go through `isUuid` before a query compares them with a `uuid` column, so a
 * malformed id is a 404 rather than PostgreSQL's 22P02. `isLowerCaseUuid` is for values Plinth wrote
 * itself and reads back as text (object keys, archive paths), where an upper-case form would name a
 * different object.
 */
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const LOWER_CASE_UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export function isUuid(value: string): boolean {
  return UUID.test(value);
}

export function isLowerCaseUuid(value: string): boolean {
  return LOWER_CASE_UUID.test(value);
}
