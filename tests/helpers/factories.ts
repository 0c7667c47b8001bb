import { randomBytes } from "node:crypto";
import type { Executor } from "../../src/db/client.ts";
import { createTenant, type Tenant } from "../../src/tenancy/tenants.ts";

/** A fresh tenant with a unique code. */
export function makeTenant(db: Executor, name = "Test tenant"): Promise<Tenant> {
  return createTenant(db, { code: `t-${randomBytes(6).toString("hex")}`, name });
}

/** Base64 of 32 random bytes: a valid tenant-secret master key. */
export function newMasterKey(): string {
  return randomBytes(32).toString("base64");
}
