import { describe, expect, test } from "bun:test";
import { ManualClock } from "../../src/clock.ts";
import { systemCtx } from "../../src/context.ts";
import type { ProviderStatus } from "../../src/db/schema/providers.ts";
import {
  type GlobalProviderDefault,
  listTenantProviders,
  putTenantProvider,
  readProviderSecrets,
  resolveProvider,
  updateTenantProviderStatus,
} from "../../src/providers/tenant-providers.ts";
import { writeTenantSecret } from "../../src/providers/tenant-secret-store.ts";
import { parseTenantSecretKeys } from "../../src/security/tenant-secrets.ts";
import { useTestDatabase } from "../helpers/app.ts";
import { createTenant, newMasterKey } from "../helpers/identity.ts";

const t = useTestDatabase();

const now = new Date("2026-11-01T00:00:00Z");
const providerDeps = () => ({ database: t.database, clock: new ManualClock(now) });
const globalSms: GlobalProviderDefault = { provider: "platform-sms", settings: { sender: "PLINTH" } };

type TenantRow = ProviderStatus | "absent";
const cases: { tenant: TenantRow; global: boolean; expected: "tenant" | "global" | "none" }[] = [
  { tenant: "Active", global: true, expected: "tenant" },
  { tenant: "Active", global: false, expected: "tenant" },
  { tenant: "Disabled", global: true, expected: "none" },
  { tenant: "Disabled", global: false, expected: "none" },
  { tenant: "Suspended", global: true, expected: "none" },
  { tenant: "Suspended", global: false, expected: "none" },
  { tenant: "absent", global: true, expected: "global" },
  { tenant: "absent", global: false, expected: "none" },
];

describe("resolveProvider: tenant row × global default", () => {
  for (const c of cases) {
    test(`tenant ${c.tenant}, global default ${c.global ? "present" : "absent"} → ${c.expected}`, async () => {
      const tenant = await createTenant(t.database.db);
      if (c.tenant !== "absent") {
        await putTenantProvider(providerDeps(), systemCtx("test", tenant.id), {
          type: "sms",
          provider: "tenant-sms",
          status: c.tenant,
          settings: { from: "+15550100" },
          secretRefs: {},
        });
      }
      // another type configured for the tenant changes nothing for sms
      await putTenantProvider(providerDeps(), systemCtx("test", tenant.id), {
        type: "payment",
        provider: "stripe",
        status: "Active",
        settings: {},
        secretRefs: {},
      });
      const resolved = await resolveProvider(t.database.db, tenant.id, "sms", c.global ? globalSms : null);
      if (c.expected === "none") expect(resolved).toBeNull();
      else expect(resolved?.source).toBe(c.expected);
      if (c.expected === "tenant") expect(resolved?.provider.provider).toBe("tenant-sms");
      if (c.expected === "global") expect(resolved?.provider).toEqual(globalSms);
    });
  }

  test("disabling an Active provider stops resolution without falling back; re-activating restores it", async () => {
    const tenant = await createTenant(t.database.db);
    await putTenantProvider(providerDeps(), systemCtx("test", tenant.id), {
      type: "ai",
      provider: "openai",
      status: "Active",
      settings: {},
      secretRefs: {},
    });
    expect((await resolveProvider(t.database.db, tenant.id, "ai", globalSms))?.source).toBe("tenant");
    await updateTenantProviderStatus(providerDeps(), systemCtx("test", tenant.id), {
      type: "ai",
      status: "Disabled",
    });
    expect(await resolveProvider(t.database.db, tenant.id, "ai", globalSms)).toBeNull();
    await updateTenantProviderStatus(providerDeps(), systemCtx("test", tenant.id), {
      type: "ai",
      status: "Active",
    });
    expect((await resolveProvider(t.database.db, tenant.id, "ai", globalSms))?.source).toBe("tenant");
    await expect(
      updateTenantProviderStatus(providerDeps(), systemCtx("test", tenant.id), {
        type: "identity",
        status: "Disabled",
      }),
    ).rejects.toMatchObject({
      code: "not_found",
    });
  });

  test("a tenant's provider never resolves for another tenant", async () => {
    const a = await createTenant(t.database.db);
    const b = await createTenant(t.database.db);
    await putTenantProvider(providerDeps(), systemCtx("test", a.id), {
      type: "sms",
      provider: "a-sms",
      status: "Active",
      settings: {},
      secretRefs: {},
    });
    expect(await resolveProvider(t.database.db, b.id, "sms", null)).toBeNull();
    expect((await listTenantProviders(providerDeps(), systemCtx("test", b.id), { limit: 50 })).items).toEqual(
      [],
    );
  });

  test("settings that look secret are refused; secrets are referenced by name and read server-side", async () => {
    const tenant = await createTenant(t.database.db);
    await expect(
      putTenantProvider(providerDeps(), systemCtx("test", tenant.id), {
        type: "sms",
        provider: "twilio",
        status: "Active",
        settings: { authToken: "inline-token" },
        secretRefs: {},
      }),
    ).rejects.toMatchObject({ code: "validation_failed" });
    const { keyring } = parseTenantSecretKeys({ KeyId: "k", MasterKey: newMasterKey(), PreviousKeys: [] });
    if (!keyring) throw new Error("keyring");
    await writeTenantSecret(t.database.db, keyring, tenant.id, { name: "twilio-auth", value: "tw-123", now });
    const row = await putTenantProvider(providerDeps(), systemCtx("test", tenant.id), {
      type: "sms",
      provider: "twilio",
      status: "Active",
      settings: { accountSid: "AC1" },
      secretRefs: { authToken: "twilio-auth" },
    });
    expect(await readProviderSecrets(t.database.db, keyring, row)).toEqual({ authToken: "tw-123" });
  });
});
