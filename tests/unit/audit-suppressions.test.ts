import { expect, test } from "bun:test";
import { AuditSuppressions } from "../../src/audit/suppressions.ts";

const MINUTE = 60_000;

test("one line a window per key, carrying every drop since the last; keys apart", () => {
  const s = new AuditSuppressions();
  expect(s.dropped("a", 0, MINUTE)).toEqual({ suppressed: 1, sinceMs: null });
  for (let i = 1; i < 100; i++) expect(s.dropped("a", i * 500, MINUTE)).toBeNull();
  expect(s.dropped("b", 1_000, MINUTE)).toEqual({ suppressed: 1, sinceMs: null });
  // 99 after the first line, and this one
  expect(s.dropped("a", MINUTE, MINUTE)).toEqual({ suppressed: 100, sinceMs: MINUTE });
  // long after: the rows since the last line are not lost, only late
  expect(s.dropped("a", 10 * MINUTE, MINUTE)).toEqual({ suppressed: 1, sinceMs: 9 * MINUTE });
});

test("a clock put back by more than a window does not silence the key until it catches up", () => {
  const s = new AuditSuppressions();
  s.dropped("a", 10 * MINUTE, MINUTE);
  expect(s.claimMarker("a", 10 * MINUTE, MINUTE)).toBe(true);
  expect(s.dropped("a", 10 * MINUTE - 1_000, MINUTE)).toBeNull();
  expect(s.claimMarker("a", 10 * MINUTE - 1_000, MINUTE)).toBe(false);
  expect(s.dropped("a", 2 * MINUTE, MINUTE)).toEqual({ suppressed: 2, sinceMs: 0 });
  expect(s.claimMarker("a", 2 * MINUTE, MINUTE)).toBe(true);
});

test("bounded: past maxKeys the oldest key is forgotten", () => {
  const s = new AuditSuppressions(3);
  for (const key of ["a", "b", "c", "d"]) s.dropped(key, 0, MINUTE);
  expect(s.size).toBe(3);
  // "a" was forgotten: its next drop is a first line again
  expect(s.dropped("a", 1_000, MINUTE)).toEqual({ suppressed: 1, sinceMs: null });
  expect(s.dropped("d", 1_000, MINUTE)).toBeNull();
});
