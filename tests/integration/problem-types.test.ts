import { expect, test } from "bun:test";
import { errorCodes } from "../../src/errors.ts";
import { problemTypes } from "../../src/http/problem-types.ts";
import { useTestApp } from "../helpers/app.ts";

// A problem's `type` leads somewhere: a page on the API describing the code.

const app = useTestApp();

test("a problem's type is /api/problems/<code>, and following it answers the code's page", async () => {
  const missing = await app.request("/api/no-such-thing");
  expect(missing.status).toBe(404);
  const body = (await missing.json()) as { type: string; code: string; title: string };
  expect(body.type).toBe("/api/problems/not_found");
  expect(body.title).toBe(problemTypes.not_found.title);
  // resolved against the request's URL, as RFC 9457 §3.1.1 says a relative reference is
  const followed = await app.request(new URL(body.type, "http://localhost/api/no-such-thing").pathname);
  expect(followed.status).toBe(200);
  expect(followed.headers.get("content-type")).toStartWith("text/html");
  expect(followed.headers.get("cache-control")).toBe("public, max-age=86400");
  expect(followed.headers.get("content-security-policy")).toContain("default-src 'none'");
  expect(followed.headers.get("content-security-policy")).toContain("frame-ancestors 'none'");
  const page = await followed.text();
  expect(page).toContain("<h1>Not found</h1>");
  expect(page).toContain("HTTP 404");
});

test("every code has a page with its when and what-to-do; the index links them all", async () => {
  const index = await (await app.request("/api/problems")).text();
  for (const code of errorCodes) {
    expect(index).toContain(`href="/api/problems/${code}"`);
    const response = await app.request(`/api/problems/${code}`);
    expect(response.status).toBe(200);
    const page = await response.text();
    expect(page).toContain(`code: ${code}`);
    expect(page).toContain("When it happens");
    expect(page).toContain("What to do");
  }
});

test("an unknown code is a 404 problem; the pages need no authentication", async () => {
  const unknown = await app.request("/api/problems/teapot");
  expect(unknown.status).toBe(404);
  expect(unknown.headers.get("content-type")).toStartWith("application/problem+json");
  expect(((await unknown.json()) as { type: string }).type).toBe("/api/problems/not_found");
  expect(
    (await app.request("/api/problems/unauthorized", { headers: { authorization: "Bearer x" } })).status,
  ).toBe(200);
});
