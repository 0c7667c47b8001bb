import { scopesGranting } from "../api-keys/scopes.ts";
import { markdownTable } from "../markdown-table.ts";
import { type Access, type DeclaredRoute, type TenantAccess, undeclaredRoutes } from "./access.ts";

const METHOD_ORDER = ["GET", "POST", "PUT", "PATCH", "DELETE"];

/** `/api/tenant/domains/:id` as the document writes it, `/api/tenant/domains/{id}`. */
const documentPath = (path: string) => path.replace(/:(\w+)(\{[^}]*\})?/g, "{$1}");

const byPath = (a: DeclaredRoute, b: DeclaredRoute) =>
  documentPath(a.path).localeCompare(documentPath(b.path)) ||
  METHOD_ORDER.indexOf(a.method) - METHOD_ORDER.indexOf(b.method);

const routeCell = (route: DeclaredRoute) => `\`${route.method} ${documentPath(route.path)}\``;

function keyCell({ apiKey }: TenantAccess): string {
  if (apiKey === "none") return "403";
  if (apiKey === "any") return "any key";
  return scopesGranting(apiKey)
    .map((scope) => `\`${scope}\``)
    .join(" or ");
}

const roleCell = ({ tenant }: TenantAccess, role: string) =>
  tenant === "everyone" || (tenant as readonly string[]).includes(role) ? "yes" : "403";

const READS = new Set(["GET", "HEAD"]);

const PUBLIC_WHO: Partial<Record<Access & string, string>> = {
  public: "anyone",
  probe: "anyone (a health probe: before the host check, CORS, the rate limits)",
  signedIn: "any signed-in user or platform staff (a token or the browser session); API keys 403",
};

const INTRO = `# Roles

<!-- Generated from each route's declared access by \`bun run docs:roles\`; do not edit by hand. -->

Who may call a route is declared once, on the route: the first argument of \`apiRoute(access, …)\`
in src/http/routes/ (the kinds are in src/http/access.ts). From that declaration come the route's
guard (src/http/middleware/guards.ts: the route's first middleware, after authentication and before
the request is validated), its OpenAPI \`security\`, the role matrix
tests/integration/route-security.test.ts walks (401 without a token, 403 to a role outside the row,
404 for another tenant's resource) and this page. \`bun run docs:check\` (part of \`bun run check\`)
fails when this page is out of date, and on a route under /api/ that declares no access.

Authentication is mounted once per area in src/app.ts (\`/api/admin/*\`, \`/api/tenant/*\`, and the
signed-in routes of /api/auth/), so a request without credentials gets 401 there before the route is
found. A refused signed-in caller gets 403 \`forbidden\`, recorded as \`authorization.refused\`
(docs/audit.md).

## Platform roles

Platform staff belong to no tenant (\`users.pool\` \`platform\`: never a member of one) and hold platform roles
(\`platform_role_bindings\`, catalog seeded by the migrator, src/identity/roles.ts). A route declared
\`platform\` (every \`/api/admin/*\` route) lets them in:

${markdownTable(
  ["role", "routes declared `platform`, and `/console`"],
  [
    ["`platform_admin`", "every method: reads and changes"],
    [
      "`platform_viewer`",
      "reads only (GET, HEAD): every other method answers 403; the console shows no button that changes anything",
    ],
  ],
).join("\n")}

Both get 403 on every tenant route. The console applies the same test (\`mayChangePlatform\`) to its
own form posts. The first administrator comes from \`migrate --bootstrap-platform-admin\`; an
administrator adds more staff, with either role, through \`POST /api/admin/platform-users\`
(\`{ email, name, password, role }\`; 409 when the e-mail is taken among staff; the password must be
changed at first sign-in). Tests: route-security.test.ts (\`PLATFORM_MATRIX\`: every admin route,
both roles), console.test.ts and tests/e2e/console.test.ts.

## Tenant roles

A tenant user holds one role in its tenant: \`owner\`, \`admin\` or \`member\`
(\`tenant_memberships.role\`, src/identity/roles.ts). A tenant route declares the roles it lets
through and the API-key scope it takes: \`tenantAccess(["owner", "admin"], { apiKey: "users:read" })\`,
or \`tenantAccess("everyone", …)\` for every user of the tenant. Platform staff belong to no tenant
and get 403 on every tenant route; they act on tenants through \`/api/admin/*\`.

The guards decide by role; the finer rules (whose object, which target user) are in the domain
functions, from \`ctx.actor.roles\`:

- admins manage users but never create, disable or remove an owner (403); only an owner adds an
  owner;
- a member deletes only the storage objects they uploaded (403 otherwise; the uploader is the
  grant's \`uploaded_by\` in \`storage_grants\`, docs/billing.md); an object without a recorded uploader (a
  server-side upload, one made with an API key, or one from before grants) is deleted only by
  owners, admins and keys;
- the same rule holds for writing: a member gets an upload URL for a key only when every version
  stored under it is theirs and no other caller's URL for it is still open (403 otherwise), so a
  member cannot replace what another member stored (what everyone downloads) nor take away its
  delete; the first writer keeps both. Owners, admins and keys write any key, as they delete any
  (after which the member who wrote it first no longer deletes it alone);
- a tenant keeps at least one Active owner (409 \`conflict\` on disabling or removing the last one).

Every tenant user manages their own account through \`/api/auth/*\` (sign-in, sessions, password).
`;

const KEYS = `**API keys** (docs/api-keys.md) have no role: the scope a route declares stands for it (a scope
of the form \`area:*\` grants the area's other scopes too, but \`users:admin\`). A key whose scopes do
not grant a route's is refused with 403 naming the scope it needs; a route declared
\`apiKey: "none"\` is 403 to every key. A key never creates or changes a principal with more power than
itself: creating a user takes the dedicated \`users:admin\`, and a key creates, disables and removes
members only, when its scopes reach everything a member does (docs/api-keys.md); \`storage:*\` deletes
any object (one a key uploads has no recorded uploader). Keys get 403 on
\`/api/auth/*\` (no password, no session) and 401 on every \`/api/admin/*\` route.
`;

/** docs/roles.md from the routes' declared access (`bun run docs:roles`); a test keeps them equal. */
export function renderRolesReference(routes: readonly DeclaredRoute[]): string {
  const undeclared = undeclaredRoutes(routes);
  if (undeclared.length > 0) throw new Error(`routes without declared access: ${undeclared.join(", ")}`);
  const declared = [...routes].filter((r) => r.access !== undefined && r.path.startsWith("/")).sort(byPath);
  const tenant = declared.filter(
    (r): r is DeclaredRoute & { access: TenantAccess } => typeof r.access === "object",
  );
  const platform = declared.filter((r) => r.access === "platform");
  const others = declared.filter(
    (r) => typeof r.access === "string" && r.access !== "platform" && /^\/(api|\.well-known)\//.test(r.path),
  );
  const lines = [
    INTRO,
    ...markdownTable(
      ["route", "owner", "admin", "member", "API key (scope)"],
      tenant.map((r) => [
        routeCell(r),
        roleCell(r.access, "owner"),
        roleCell(r.access, "admin"),
        roleCell(r.access, "member"),
        keyCell(r.access),
      ]),
    ),
    "",
    KEYS,
    "## Platform routes",
    "",
    "Every route declared `platform`; API keys get 401 on each.",
    "",
    ...markdownTable(
      ["route", "`platform_admin`", "`platform_viewer`"],
      platform.map((r) => [routeCell(r), "yes", READS.has(r.method) ? "yes" : "403"]),
    ),
    "",
    "## Public and signed-in routes",
    "",
    ...markdownTable(
      ["route", "who"],
      others.map((r) => [routeCell(r), PUBLIC_WHO[r.access as Access & string] ?? String(r.access)]),
    ),
  ];
  return `${lines.join("\n")}\n`;
}
