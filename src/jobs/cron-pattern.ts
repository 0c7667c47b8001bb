/**
 * The cron expressions the admin API takes, as one regular expression: the document states it as
 * the `cron` field's `pattern` and the route enforces the same expression before croner parses it.
 * Five fields (minute, hour, day of month, month, day of week), or six with a seconds field first
 * that is one value, so a schedule made through the API runs at most once a minute (code may define
 * finer ones with `defineSchedule`). A field is `*`, `*​/step`, or a comma list of numbers and
 * ascending ranges `a-b` (a range with an optional `/step`), numbers within the field's bounds and
 * steps from 1 to its maximum; fields are separated by one space. croner accepts every expression
 * this matches (tests/unit/cron-pattern.test.ts generates them); croner's names (`MON`, `JAN`),
 * `L`, `W`, `#` and `?` are not part of the API's form.
 */

/** A decimal number in [lo, hi] (hi < 100); a one-digit number may have a leading zero. */
export function numberIn(lo: number, hi: number): string {
  const parts: string[] = [];
  const digits = (a: number, b: number) => (a === b ? `${a}` : `[${a}-${b}]`);
  if (lo <= 9) parts.push(`0?${digits(lo, Math.min(hi, 9))}`);
  let fullTens: number[] = [];
  const flush = () => {
    const [first] = fullTens;
    const last = fullTens.at(-1);
    if (first !== undefined && last !== undefined) parts.push(`${digits(first, last)}[0-9]`);
    fullTens = [];
  };
  for (let tens = Math.max(1, Math.floor(lo / 10)); tens <= Math.floor(hi / 10); tens++) {
    const a = Math.max(lo, tens * 10) - tens * 10;
    const b = Math.min(hi, tens * 10 + 9) - tens * 10;
    if (a === 0 && b === 9) fullTens.push(tens);
    else {
      flush();
      parts.push(`${tens}${digits(a, b)}`);
    }
  }
  flush();
  return parts.length === 1 ? (parts[0] ?? "") : `(?:${parts.join("|")})`;
}

/** One field of numbers in [lo, hi]: `*`, `*​/step`, or a list of numbers and ascending ranges. */
function field(lo: number, hi: number): string {
  const step = `/${numberIn(1, hi)}`;
  const ranges: string[] = [];
  for (let a = lo; a < hi; a++) ranges.push(`${a <= 9 ? "0?" : ""}${a}-${numberIn(a + 1, hi)}`);
  const item = `(?:(?:${ranges.join("|")})(?:${step})?|${numberIn(lo, hi)})`;
  return `(?:\\*(?:${step})?|${item}(?:,${item})*)`;
}

/** The fields after the optional seconds: minute, hour, day of month, month, day of week (0 and 7: Sunday). */
const FIELDS = [field(0, 59), field(0, 23), field(1, 31), field(1, 12), field(0, 7)].join(" ");

/** The admin API's cron form (see the module's comment), anchored. */
export const API_CRON_PATTERN = `^(?:${numberIn(0, 59)} )?${FIELDS}$`;
export const API_CRON = new RegExp(API_CRON_PATTERN);
