import { type Context, Hono } from "hono";
import { disableTotp, enrolTotp, getMfaStatus, regenerateBackupCodes } from "../../auth/mfa-settings.ts";
import { callerOf } from "../../auth/sessions.ts";
import { confirmTotp } from "../../auth/totp-factor.ts";
import { listTrustedDevices, revokeTrustedDevice } from "../../auth/trusted-devices.ts";
import type { Deps } from "../../deps.ts";
import { AppError } from "../../errors.ts";
import { isUuid } from "../../tenancy/tenants.ts";
import { toAppError } from "../problem-json.ts";
import { ctxOf } from "../request-context.ts";
import { type Html, layout } from "./layout.ts";
import { backupCodesBody, MFA_DONE, mfaBody, totpConfirmAgainBody, totpEnrolmentBody } from "./mfa-views.ts";
import { consoleActed, formOf, pageResponse } from "./respond.ts";
import { type ConsoleEnv, seeOther, viewerOf } from "./session.ts";

const SECTION = "/console/mfa";
const userIdOf = (c: Context<ConsoleEnv>) => callerOf(ctxOf(c)).userId;

/**
 * `/console/mfa`: the signed-in staff member's second factors (docs/console.md "Second factors"),
 * through the functions `/api/auth/mfa/*` calls: enrol an authenticator app (QR code, a first code,
 * the backup codes once), new backup codes, remove the authenticator. The changes that need a fresh
 * second factor get the step-up prompt (step-up.ts) and then run.
 */
export function mfaPages(deps: Deps) {
  const router = new Hono<ConsoleEnv>();
  const page = (c: Context<ConsoleEnv>, title: string, body: Html, status?: 400) =>
    pageResponse(c, layout({ title, section: SECTION, viewer: viewerOf(c), body }), status);

  router.get(SECTION, async (c) => {
    const status = await getMfaStatus(deps, ctxOf(c));
    const devices = (await listTrustedDevices(deps, ctxOf(c), { limit: 200 })).items;
    const done = Object.keys(MFA_DONE).find((key) => c.req.query(key) !== undefined);
    return page(c, "Second factors", mfaBody(viewerOf(c), status, done, devices));
  });

  router.post(`${SECTION}/trusted-devices/:id/revoke`, async (c) => {
    const id = c.req.param("id");
    if (!isUuid(id)) throw new AppError("not_found", "No trusted device of yours has this id.");
    await revokeTrustedDevice(deps, ctxOf(c), { id });
    consoleActed(deps, c, "mfa.trusted_device_revoked", { type: "trusted_device", id });
    return seeOther(c, `${SECTION}?untrusted`);
  });

  router.post(`${SECTION}/totp`, async (c) => {
    const enrolment = await enrolTotp(deps, ctxOf(c));
    return page(c, "Set up an authenticator app", totpEnrolmentBody(viewerOf(c), enrolment));
  });

  router.post(`${SECTION}/totp/confirm`, async (c) => {
    const code = ((await formOf(c)).code ?? "").trim();
    try {
      const { backupCodes } = await confirmTotp(deps, ctxOf(c), { code });
      consoleActed(deps, c, "mfa.enrolled", { type: "user", id: userIdOf(c) });
      return page(c, "Your backup codes", backupCodesBody(backupCodes, "Authenticator app enrolled."));
    } catch (error) {
      if (toAppError(error).code !== "validation_failed") throw error;
      const message = "That code does not match: enter the code the app shows now.";
      return page(c, "Set up an authenticator app", totpConfirmAgainBody(viewerOf(c), message), 400);
    }
  });

  router.post(`${SECTION}/backup-codes`, async (c) => {
    const { backupCodes } = await regenerateBackupCodes(deps, ctxOf(c));
    consoleActed(deps, c, "mfa.backup_codes_regenerated", { type: "user", id: userIdOf(c) });
    return page(
      c,
      "Your backup codes",
      backupCodesBody(backupCodes, "New backup codes: the old ones no longer work."),
    );
  });

  router.post(`${SECTION}/totp/remove`, async (c) => {
    await disableTotp(deps, ctxOf(c));
    consoleActed(deps, c, "mfa.removed", { type: "user", id: userIdOf(c) });
    return seeOther(c, `${SECTION}?removed`);
  });
  return router;
}
