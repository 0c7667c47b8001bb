import { expect, test } from "bun:test";
import { TrieRouter } from "hono/router/trie-router";
import { MemoRouter } from "../../src/http/memo-router.ts";

function table<T>(
  router: { add(method: string, path: string, handler: T): void },
  handler: (n: number) => T,
) {
  router.add("ALL", "*", handler(0));
  router.add("ALL", "/api/tenant/*", handler(1));
  router.add("GET", "/api/tenant/users", handler(2));
  router.add("GET", "/api/tenant/users/:id", handler(3));
  router.add("POST", "/api/admin/jobs/retry", handler(4));
  router.add("POST", "/api/admin/jobs/:id/retry", handler(5));
}

test("answers what the router it wraps answers, params included, again and again", () => {
  const memo = new MemoRouter<string>();
  const plain = new TrieRouter<string>();
  table(memo, (n) => `h${n}`);
  table(plain, (n) => `h${n}`);
  const asked: [string, string][] = [
    ["GET", "/api/tenant/users"],
    ["GET", "/api/tenant/users/7"],
    ["GET", "/api/tenant/users/8"],
    ["POST", "/api/admin/jobs/retry"],
    ["POST", "/api/admin/jobs/x/retry"],
    ["DELETE", "/api/tenant/users/7"],
    ["GET", "/nowhere"],
  ];
  for (let round = 0; round < 3; round++)
    for (const [method, path] of asked) expect(memo.match(method, path)).toEqual(plain.match(method, path));
});

test("remembers a bounded number of paths: endless distinct paths keep it at two generations", () => {
  const memo = new MemoRouter<string>();
  table(memo, (n) => `h${n}`);
  for (let i = 0; i < 100_000; i++) memo.match("GET", `/api/tenant/users/${i}`);
  expect(memo.size).toBeLessThanOrEqual(2_000);
  expect(memo.match("GET", "/api/tenant/users/99999")[0].map(([h]) => h)).toEqual(["h0", "h1", "h3"]);
});
