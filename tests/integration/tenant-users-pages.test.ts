import { beforeAll, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { userCursor } from "../../src/identity/users.ts";
import { relaxedLimits, useTestApp } from "../helpers/app.ts";
import { bearer, createTenant, createUser, signedInTenant } from "../helpers/identity.ts";

let tenant: { id: string; code: string };
let owner: string;
const created: string[] = [];

const app = useTestApp({ settings: relaxedLimits });
const t = app.testDatabase;
beforeAll(async () => {
  // its owner, admin and member first, then four more members
  const signedIn = await signedInTenant(app);
  tenant = signedIn;
  created.push(signedIn.owner.id, signedIn.admin.id, signedIn.member.id);
  for (let i = 0; i < 4; i++) created.push((await createUser(t.database.db, tenant.id)).id);
  // two users created in the same microsecond: the id decides between them, and no page loses one
  await t.database.db.execute(
    sql`update users set created_at = '2026-11-22 06:00:00.123456+00' where id in (${created[3]}, ${created[4]})`,
  );
  owner = signedIn.owner.accessToken;
  // another tenant's users never show up
  const other = await createTenant(t.database.db);
  await createUser(t.database.db, other.id, { role: "owner" });
});

type Page = { items: { id: string; createdAt: string }[]; nextCursor: string | null };
const page = async (query: string): Promise<Page> => {
  const response = await app.request(`/api/tenant/users${query}`, bearer(owner));
  expect(response.status).toBe(200);
  return (await response.json()) as Page;
};

test("pages of users: every user once, in creation order, then a null cursor", async () => {
  const all = await page("?limit=200");
  expect(all.nextCursor).toBeNull();
  expect(all.items.map((u) => u.id).sort()).toEqual([...created].sort());

  const seen: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const next: Page = await page(`?limit=2${cursor ? `&cursor=${cursor}` : ""}`);
    expect(next.items.length).toBeLessThanOrEqual(2);
    seen.push(...next.items.map((u) => u.id));
    cursor = next.nextCursor;
    pages++;
  } while (cursor);
  expect(pages).toBe(4);
  expect(seen).toEqual(all.items.map((u) => u.id));
  // without a limit: the default page
  expect((await page("")).items).toHaveLength(created.length);
});

test("a deleted user's cursor still finds the next page", async () => {
  const first = await page("?limit=2");
  const cursor = first.nextCursor as string;
  const position = userCursor.decode(cursor);
  expect(position?.id).toBe(first.items[1]?.id as string);
  await t.database.db.execute(sql`delete from users where id = ${position?.id}`);
  const rest = await page(`?limit=200&cursor=${cursor}`);
  const all = await page("?limit=200");
  expect(rest.items.map((u) => u.id)).toEqual(all.items.slice(1).map((u) => u.id));
});

test("a cursor that is not one of ours, or a bad limit, is a 400 naming the field", async () => {
  for (const [query, field] of [
    ["?cursor=not-a-cursor", "cursor"],
    [
      `?cursor=${Buffer.from("1970-01-01 00:00:00+00|x'; drop table users; --").toString("base64url")}`,
      "cursor",
    ],
    ["?limit=0", "limit"],
    ["?limit=201", "limit"],
  ] as const) {
    const response = await app.request(`/api/tenant/users${query}`, bearer(owner));
    expect(response.status).toBe(400);
    const body = (await response.json()) as { errors: { path: string }[] };
    expect(body.errors.map((e) => e.path)).toContain(field);
  }
});
