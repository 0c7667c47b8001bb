import { expect, test } from "bun:test";
import { ManualClock } from "../../src/clock.ts";
import { systemCtx } from "../../src/context.ts";
import type { AppError } from "../../src/errors.ts";
import type { SsoTestReport } from "../../src/sso/finish-sign-in.ts";
import { openTestReport, sealTestReport, TEST_REPORT_MINUTES } from "../../src/sso/test-report.ts";
import { useTestApp } from "../helpers/app.ts";

// A console test sign-in's report travels sealed in the report page's address (docs/sso.md, "Test
// sign-in"): it opens for its tenant and connection only, unaltered, for TEST_REPORT_MINUTES.
const clock = new ManualClock(Date.now());
const t = useTestApp({ clock });

const connectionId = crypto.randomUUID();
const report: SsoTestReport = {
  ok: true,
  connectionId,
  checks: [
    { check: "audience", ok: true, detail: "The ID token's audience (aud) is this connection's client id." },
  ],
  profile: { subject: "s-1", email: "ada@example.com", name: "Ada", groups: ["staff"], role: "member" },
};

const refusal = async (run: () => Promise<unknown>) => {
  try {
    await run();
  } catch (error) {
    return (error as AppError).code;
  }
  return "opened";
};

test("opens for its tenant and connection only, unaltered, and until it expires", async () => {
  const ctx = systemCtx("test", crypto.randomUUID());
  const sealed = await sealTestReport(t.deps, ctx, report);
  expect(sealed).not.toContain("ada@example.com");
  expect(Buffer.from(sealed, "base64url").toString("latin1")).not.toContain("ada@example.com");
  expect(await openTestReport(t.deps, ctx, { connectionId, sealed })).toEqual(report);

  const other = systemCtx("test", crypto.randomUUID());
  expect(await refusal(() => openTestReport(t.deps, other, { connectionId, sealed }))).toBe("not_found");
  expect(
    await refusal(() => openTestReport(t.deps, ctx, { connectionId: crypto.randomUUID(), sealed })),
  ).toBe("not_found");
  const altered = `${sealed.slice(0, -2)}${sealed.endsWith("AA") ? "BB" : "AA"}`;
  expect(await refusal(() => openTestReport(t.deps, ctx, { connectionId, sealed: altered }))).toBe(
    "not_found",
  );
  expect(await refusal(() => openTestReport(t.deps, ctx, { connectionId, sealed: "" }))).toBe("not_found");

  clock.advance(TEST_REPORT_MINUTES * 60_000 - 1000);
  expect((await openTestReport(t.deps, ctx, { connectionId, sealed })).ok).toBe(true);
  clock.advance(1000);
  expect(await refusal(() => openTestReport(t.deps, ctx, { connectionId, sealed }))).toBe("not_found");
});
