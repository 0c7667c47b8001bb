import { expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import {
  consumeSingleUseToken,
  issueSingleUseToken,
  revokeSingleUseTokens,
} from "../../src/auth/single-use-tokens.ts";
import { ManualClock } from "../../src/clock.ts";
import { systemCtx } from "../../src/context.ts";
import { execute } from "../../src/db/client.ts";
import { useTestDatabase } from "../helpers/app.ts";
import { createTenant, createUser } from "../helpers/identity.ts";

const t = useTestDatabase();
const clock = new ManualClock(new Date("2026-11-26T12:00:00Z"));
const deps = {
  get database() {
    return t.database;
  },
  clock,
};

test("a token is stored only as its hash, is used once, and of two concurrent uses exactly one wins", async () => {
  const tenant = await createTenant(t.database.db);
  const user = await createUser(t.database.db, tenant.id, { role: "member" });
  const ctx = systemCtx("test", tenant.id);
  const issued = await issueSingleUseToken(deps, ctx, {
    purpose: "password_reset",
    tenantId: tenant.id,
    userId: user.id,
    subject: "ada@example.com",
    lifetimeSeconds: 600,
  });
  expect(issued.token).toMatch(/^[A-Za-z0-9_-]{43}$/);
  const stored = await execute<{ token_hash: string }>(
    t.database.db,
    sql`select token_hash from single_use_tokens where id = ${issued.id}`,
  );
  expect(stored[0]?.token_hash).not.toBe(issued.token);
  const uses = await Promise.all(
    Array.from({ length: 5 }, () =>
      consumeSingleUseToken(deps, ctx, { purpose: "password_reset", token: issued.token }),
    ),
  );
  const won = uses.filter((u) => u !== null);
  expect(won).toHaveLength(1);
  expect(won[0]).toMatchObject({ tenantId: tenant.id, userId: user.id, subject: "ada@example.com" });
  expect(
    await consumeSingleUseToken(deps, ctx, { purpose: "password_reset", token: issued.token }),
  ).toBeNull();
});

test("a token of another purpose, another tenant, or past its lifetime is refused alike", async () => {
  const tenant = await createTenant(t.database.db);
  const other = await createTenant(t.database.db);
  const ctx = systemCtx("test", tenant.id);
  const issue = () =>
    issueSingleUseToken(deps, ctx, {
      purpose: "email_verification",
      tenantId: tenant.id,
      lifetimeSeconds: 60,
    });
  const a = await issue();
  expect(await consumeSingleUseToken(deps, ctx, { purpose: "password_reset", token: a.token })).toBeNull();
  expect(
    await consumeSingleUseToken(deps, ctx, {
      purpose: "email_verification",
      token: a.token,
      tenantId: other.id,
    }),
  ).toBeNull();
  clock.advance(60_000);
  expect(
    await consumeSingleUseToken(deps, ctx, { purpose: "email_verification", token: a.token }),
  ).toBeNull();
  const b = await issue();
  clock.advance(59_000);
  expect(
    await consumeSingleUseToken(deps, ctx, {
      purpose: "email_verification",
      token: b.token,
      tenantId: tenant.id,
    }),
  ).not.toBeNull();
});

test("a newer token replaces the user's open ones of its purpose; revoking spends them all", async () => {
  const tenant = await createTenant(t.database.db);
  const user = await createUser(t.database.db, tenant.id, { role: "member" });
  const ctx = systemCtx("test", tenant.id);
  const input = {
    purpose: "password_reset" as const,
    tenantId: tenant.id,
    userId: user.id,
    lifetimeSeconds: 600,
    replacePrevious: true,
  };
  const first = await issueSingleUseToken(deps, ctx, input);
  const second = await issueSingleUseToken(deps, ctx, input);
  expect(
    await consumeSingleUseToken(deps, ctx, { purpose: "password_reset", token: first.token }),
  ).toBeNull();
  const third = await issueSingleUseToken(deps, ctx, { ...input, replacePrevious: false });
  expect(await revokeSingleUseTokens(deps, ctx, { purpose: "password_reset", userId: user.id })).toBe(2);
  for (const token of [second.token, third.token])
    expect(await consumeSingleUseToken(deps, ctx, { purpose: "password_reset", token })).toBeNull();
});
