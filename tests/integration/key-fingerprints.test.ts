import { expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { execute } from "../../src/db/client.ts";
import {
  readTenantKeyFingerprints,
  recordKeyBindings,
  TENANT_KEY_MISMATCH,
} from "../../src/security/key-fingerprints.ts";
import { parseTenantSecretKeys, type TenantSecretKeyring } from "../../src/security/tenant-secrets.ts";
import { useTestDatabase } from "../helpers/app.ts";
import { newMasterKey } from "../helpers/identity.ts";

/** The key bindings start-up reads (writing nothing) and records once its gates pass (src/start-up-gates.ts). */
const t = useTestDatabase();

function keyring(keyId: string, masterKey = newMasterKey()): TenantSecretKeyring {
  const parsed = parseTenantSecretKeys({ KeyId: keyId, MasterKey: masterKey, PreviousKeys: [] });
  if (!parsed.keyring) throw new Error("test keyring");
  return parsed.keyring;
}

const recorded = async (keyId: string) =>
  (
    await execute<{ n: number }>(
      t.database.db,
      sql`select count(*)::int as n from tenant_secret_keys where key_id = ${keyId}`,
    )
  )[0]?.n;

test("reading writes nothing; recording the unrecorded key id binds it; another key under it then mismatches", async () => {
  const keyId = `fp-${crypto.randomUUID().slice(0, 8)}`;
  const first = keyring(keyId);
  expect(await readTenantKeyFingerprints(t.database.db, first)).toEqual({
    mismatched: [],
    unrecorded: [keyId],
  });
  expect(await recorded(keyId)).toBe(0);

  expect(await recordKeyBindings(t.database.db, first, [keyId])).toEqual({
    checked: true,
    problems: [],
    unrecorded: [],
  });
  expect(await recorded(keyId)).toBe(1);
  expect(await readTenantKeyFingerprints(t.database.db, first)).toEqual({ mismatched: [], unrecorded: [] });

  const other = keyring(keyId);
  expect(await readTenantKeyFingerprints(t.database.db, other)).toEqual({
    mismatched: [keyId],
    unrecorded: [],
  });
});

test("recording after another process recorded a different key under the same id (between read and record) is a problem, and keeps the first", async () => {
  const keyId = `fp-${crypto.randomUUID().slice(0, 8)}`;
  const mine = keyring(keyId);
  const theirs = keyring(keyId);
  const read = await readTenantKeyFingerprints(t.database.db, mine);
  expect(read.unrecorded).toEqual([keyId]);
  // the other process's start passed its gates first
  await recordKeyBindings(t.database.db, theirs, [keyId]);
  expect(await recordKeyBindings(t.database.db, mine, read.unrecorded)).toEqual({
    checked: true,
    problems: [`Security:TenantSecrets key id(s) ${keyId}: ${TENANT_KEY_MISMATCH}`],
    unrecorded: [],
  });
  expect((await readTenantKeyFingerprints(t.database.db, theirs)).mismatched).toEqual([]);
});

test("nothing to record: no keyring, or no key id to record, records nothing", async () => {
  expect(await recordKeyBindings(t.database.db, null, ["x"])).toEqual({
    checked: true,
    problems: [],
    unrecorded: [],
  });
  expect(await recordKeyBindings(t.database.db, keyring("unused"), [])).toEqual({
    checked: true,
    problems: [],
    unrecorded: [],
  });
  expect(await recorded("unused")).toBe(0);
});
