import type { TenantCtx } from "../context.ts";
import { AppError } from "../errors.ts";
import type { SsoTestReport } from "./finish-sign-in.ts";
import type { SsoDeps } from "./sso-deps.ts";

/** The data-protection purpose of a test sign-in's report carried to the console. */
const PURPOSE = ["sso", "test-report"] as const;

/** How long the console can open a test sign-in's report after the callback wrote it. */
export const TEST_REPORT_MINUTES = 10;

interface SealedReport {
  tenantId: string;
  expiresAt: number;
  report: SsoTestReport;
}

const unknownReport = () =>
  new AppError("not_found", "This test sign-in report is unknown or expired: run the test sign-in again.");

/**
 * A test sign-in's report sealed for the console's report page (`?report=…`): encrypted and
 * authenticated by data protection (the address and groups it names are not readable in the URL),
 * bound to the tenant, valid `TEST_REPORT_MINUTES`. Nothing is stored: any API process opens it.
 */
export async function sealTestReport(deps: SsoDeps, ctx: TenantCtx, report: SsoTestReport): Promise<string> {
  const sealed: SealedReport = {
    tenantId: ctx.tenantId,
    expiresAt: deps.clock.now().getTime() + TEST_REPORT_MINUTES * 60_000,
    report,
  };
  return deps.dataProtection.forPurpose(...PURPOSE).protect(JSON.stringify(sealed));
}

/**
 * The report `sealed` holds, for connection `connectionId` of the ctx tenant; anything else (another
 * tenant's or connection's report, an expired or altered one) is the same 404.
 */
export async function openTestReport(
  deps: SsoDeps,
  ctx: TenantCtx,
  input: { connectionId: string; sealed: string },
): Promise<SsoTestReport> {
  let opened: SealedReport;
  try {
    opened = JSON.parse(
      await deps.dataProtection.forPurpose(...PURPOSE).unprotect(input.sealed),
    ) as SealedReport;
  } catch {
    throw unknownReport();
  }
  if (
    opened.tenantId !== ctx.tenantId ||
    opened.report?.connectionId !== input.connectionId ||
    !(opened.expiresAt > deps.clock.now().getTime())
  )
    throw unknownReport();
  return opened.report;
}
