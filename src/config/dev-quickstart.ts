import { generateKeyPairSync, randomBytes } from "node:crypto";
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/** Where `npm run dev` keeps the keys it made, beside the embedded database (0600). */
export const QUICKSTART_KEYS_FILE = "quickstart-keys.json";

interface QuickstartKeys {
  tenantSecretKeyId: string;
  tenantSecretMasterKey: string;
  smsCodePepper: string;
  jwtKeyId: string;
  jwtPrivateKey: string;
}

/** The keys of this checkout's quickstart: read from `dir`, or made once and kept there (0600). */
function quickstartKeys(dir: string): QuickstartKeys {
  const path = join(dir, QUICKSTART_KEYS_FILE);
  try {
    const kept = JSON.parse(readFileSync(path, "utf8")) as Partial<QuickstartKeys>;
    if (
      kept.tenantSecretKeyId &&
      kept.tenantSecretMasterKey &&
      kept.smsCodePepper &&
      kept.jwtKeyId &&
      kept.jwtPrivateKey
    )
      return kept as QuickstartKeys;
  } catch {
    // absent or unreadable: made anew below
  }
  const suffix = randomBytes(4).toString("hex");
  const keys: QuickstartKeys = {
    tenantSecretKeyId: `dev-${suffix}`,
    tenantSecretMasterKey: randomBytes(32).toString("base64"),
    smsCodePepper: randomBytes(32).toString("base64"),
    jwtKeyId: `dev-${suffix}`,
    jwtPrivateKey: generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey.export({
      type: "pkcs8",
      format: "pem",
    }) as string,
  };
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  writeFileSync(path, `${JSON.stringify(keys, null, 2)}\n`, { mode: 0o600 });
  chmodSync(path, 0o600);
  return keys;
}

/**
 * The settings `npm run dev` (Development, embedded PGlite in `dir`) supplies where the operator set
 * nothing: the kept keys (tenant secrets, SMS pepper, JWT), the console allowed from the origins it
 * serves, webhooks to local receivers, single sign-on at a local identity provider. `isSet` says whether a key already has a value from any
 * source; those are left alone.
 */
export function quickstartDefaults(
  dir: string,
  port: number,
  isSet: (key: string) => boolean,
): Record<string, string> {
  const keys = quickstartKeys(dir);
  const out: Record<string, string> = {};
  const give = (key: string, value: string) => {
    if (!isSet(key)) out[key] = value;
  };
  if (!isSet("Security:TenantSecrets:MasterKey")) {
    give("Security:TenantSecrets:KeyId", keys.tenantSecretKeyId);
    give("Security:TenantSecrets:MasterKey", keys.tenantSecretMasterKey);
  }
  give("Authentication:Sms:CodePepper", keys.smsCodePepper);
  if (!isSet("Security:Jwt:PrivateKey") && !isSet("Security:Jwt:CurrentKeyId")) {
    give("Security:Jwt:CurrentKeyId", keys.jwtKeyId);
    give("Security:Jwt:PrivateKey", keys.jwtPrivateKey);
  }
  if (!isSet("BrowserAuth:AllowedOrigins:0")) {
    out["BrowserAuth:AllowedOrigins:0"] = `http://localhost:${port}`;
    out["BrowserAuth:AllowedOrigins:1"] = `http://127.0.0.1:${port}`;
  }
  give("Webhooks:AllowPrivateDestinations", "true");
  give("Sso:AllowPrivateProviders", "true");
  return out;
}
