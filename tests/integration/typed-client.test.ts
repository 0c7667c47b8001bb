import { expect, test } from "bun:test";
import { main } from "../../examples/client/main.ts";
import { useTestApp } from "../helpers/app.ts";
import { createTenant, createUser, PASSWORD } from "../helpers/identity.ts";

const app = useTestApp();

test("the generated client walks the main flows: sign in, page the users, add a domain (a typed Problem), sign out", async () => {
  const tenant = await createTenant(app.db);
  const owner = await createUser(app.db, tenant.id, { role: "owner" });
  for (let i = 0; i < 3; i++) await createUser(app.db, tenant.id);
  const lines: string[] = [];
  const log = console.log;
  console.log = (line: string) => lines.push(line);
  try {
    // every answer goes through the harness, so it is validated against the document too
    const result = await main(
      "http://localhost",
      { email: owner.email, password: PASSWORD, tenant: tenant.code },
      async (request) => app.app.fetch(request, { peerAddress: "127.0.0.1" }),
    );
    expect(result.users.length).toBe(4);
  } finally {
    console.log = log;
  }
  expect(lines[0]).toStartWith(`signed in as ${owner.email}`);
  expect(lines.at(-1)).toBe("signed out (204)");
});
