import { expect, test } from "bun:test";
import { unstorable } from "../../src/http/middleware/storable-input.ts";

test("unstorable: a NUL or an unpaired surrogate anywhere, nothing else", () => {
  for (const text of ["a\0b", "\0", "x\ud800", "\ud800y", "\udc00", "a\udc00\ud800b", "😀\ud83d"])
    expect(unstorable(text)).toBe(true);
  const token = `eyJ${"abcXYZ_-.".repeat(90)}`;
  for (const text of ["", "plain", "é and ü", "😀", "\ud83d\ude00\ud83d\ude00", token, "\\u0000", "%00"])
    expect(unstorable(text)).toBe(false);
});
