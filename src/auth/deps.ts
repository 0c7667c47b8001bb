import type { Deps } from "../deps.ts";
import type { SmsSender } from "./sms.ts";
import type { TokenService } from "./tokens.ts";

/** What the sign-in flows and the session lookup need from the process's deps. */
export interface AuthDeps
  extends Pick<
    Deps,
    | "database"
    | "clock"
    | "config"
    | "windows"
    | "logger"
    | "dataProtection"
    | "sessionCache"
    | "pending"
    | "counters"
    | "telemetry"
    | "tenantSecretKeyring"
    | "auditSuppressions"
  > {
  tokens: TokenService;
  sms: SmsSender;
  /** HMAC key for SMS codes (`Authentication:Sms:CodePepper`). */
  smsPepper: string;
}
