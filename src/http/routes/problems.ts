import { z } from "@hono/zod-openapi";
import { AppError, type ErrorCode, errorCodes } from "../../errors.ts";
import { defineArea } from "../area.ts";
import { apiRoute, problem } from "../openapi.ts";
import { statusOf } from "../problem-json.ts";
import { problemTypePath, problemTypes } from "../problem-types.ts";
import { createRouter } from "../request-context.ts";

const isCode = (value: string): value is ErrorCode => (errorCodes as readonly string[]).includes(value);

const escapeHtml = (text: string) =>
  text.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`).replace(/`([^`]*)`/g, "<code>$1</code>");

/** Public and the same for everyone: browsers and proxies may keep them a day. */
const CACHE_CONTROL = "public, max-age=86400";
/** Plain HTML: nothing to load, nothing to run. */
const PAGE_CSP = "default-src 'none'";

function page(title: string, body: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)} · Plinth API</title></head>
<body>
${body}
</body></html>
`;
}

/** The HTML page of one problem type: what `type` in a problem+json answer leads to. */
export function renderProblemPage(code: ErrorCode): string {
  const { title, when, action } = problemTypes[code];
  return page(
    title,
    `<h1>${escapeHtml(title)}</h1>
<p><code>code: ${code}</code> · HTTP ${statusOf[code]}</p>
<h2>When it happens</h2>
<p>${escapeHtml(when)}</p>
<h2>What to do</h2>
<p>${escapeHtml(action)}</p>
<p><a href="/api/problems">Every problem type</a></p>`,
  );
}

function renderIndex(): string {
  const rows = errorCodes
    .map(
      (code) =>
        `<li><a href="${problemTypePath(code)}"><code>${code}</code></a> (${statusOf[code]}): ${escapeHtml(problemTypes[code].title)}</li>`,
    )
    .join("\n");
  return page(
    "Problem types",
    `<h1>Problem types</h1>
<p>Every error is <code>application/problem+json</code> (RFC 9457) with one of these codes.</p>
<ul>
${rows}
</ul>`,
  );
}

/** docs/errors.md: generated from the same table (`bun run docs:errors`; a test compares). */
export function renderErrorsReference(): string {
  const cell = (text: string) => text.replace(/\|/g, "\\|");
  const rows = errorCodes.map((code) => {
    const { title, when, action } = problemTypes[code];
    return `| [\`${code}\`](${problemTypePath(code)}) | ${statusOf[code]} | ${cell(title)} | ${cell(when)} | ${cell(action)} |`;
  });
  return `# Errors

<!-- Generated from src/http/problem-types.ts by \`bun run docs:errors\`; do not edit by hand. -->

Every error the API answers is \`application/problem+json\` (RFC 9457):

\`\`\`json
{
  "type": "/api/problems/not_found",
  "title": "Not found",
  "status": 404,
  "code": "not_found",
  "detail": "No such resource.",
  "instance": "/api/tenant/domains/…",
  "requestId": "…"
}
\`\`\`

\`code\` is the stable name to branch on. \`type\` is a URI reference relative to the API (RFC 9457
§3.1.1 allows one): \`GET /api/problems/<code>\` on the same host answers an HTML page describing
the code (public, cacheable); \`GET /api/problems\` lists them all. It is relative so that it is
the same on every host a tenant is served on (the API's own name and each custom domain).
\`validation_failed\` adds \`errors\`: \`[{ path, message }]\`, one per field (never its value).
\`Retry-After\` comes with \`rate_limited\` and, when known, \`unavailable\`; 401s carry
\`WWW-Authenticate\` (docs/auth.md).

| code | status | title | when it happens | what to do |
| ---- | ------ | ----- | --------------- | ---------- |
${rows.join("\n")}
`;
}

const html = (description: string) => ({
  description,
  content: { "text/html": { schema: z.string().openapi("ProblemTypePage") } },
});

const index = apiRoute("public", {
  method: "get",
  path: "/api/problems",
  operationId: "listProblemTypes",
  tags: ["meta"],
  summary: "Every problem type the API answers, as an HTML page.",
  responses: { 200: html("The list of problem types.") },
});

const one = apiRoute("public", {
  method: "get",
  path: "/api/problems/{code}",
  operationId: "getProblemType",
  tags: ["meta"],
  summary: "The page a problem's `type` leads to: what the code means and what to do.",
  request: { params: z.object({ code: z.string().openapi({ param: { name: "code", in: "path" } }) }) },
  responses: { 200: html("The description of one problem type."), 404: problem("No such problem type.") },
});

/** `GET /api/problems` and `GET /api/problems/{code}`: public HTML, the same for everyone. */
export function problemRoutes() {
  const indexPage = renderIndex();
  const pages = new Map(errorCodes.map((code) => [code as string, renderProblemPage(code)]));
  const headers = { "cache-control": CACHE_CONTROL, "content-security-policy": PAGE_CSP };
  return createRouter()
    .openapi(index, (c) => c.html(indexPage, 200, headers))
    .openapi(one, (c) => {
      const { code } = c.req.valid("param");
      const found = isCode(code) ? pages.get(code) : undefined;
      if (!found) throw new AppError("not_found", "No such problem type.");
      return c.html(found, 200, headers);
    });
}

/** The area (src/http/area.ts): listed in src/http/areas.ts, which `bun run areas:generate` writes. */
export const problemsArea = defineArea({ name: "problems", routes: [problemRoutes] });
