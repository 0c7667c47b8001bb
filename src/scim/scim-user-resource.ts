import { type SQL, sql } from "drizzle-orm";
import { scimUsers, tenantMemberships, users } from "../db/schema/index.ts";
import { ENTERPRISE_USER_SCHEMA, USER_SCHEMA } from "./scim-discovery.ts";
import { invalidValue, ScimError } from "./scim-error.ts";
import type { FilterColumns, ScalarColumn } from "./scim-filter.ts";

/** A member of the tenant as SCIM sees it: the identity, the membership and what the directory sent. */
export interface UserRecord {
  userId: string;
  email: string;
  name: string;
  pool: string;
  role: string;
  active: boolean;
  externalId: string | null;
  userName: string | null;
  attributes: Record<string, unknown> | null;
  version: number | null;
  createdAt: Date;
  updatedAt: Date;
}

/** The columns of a `UserRecord` (memberships joined with users and, where there is one, scim_users). */
export const userRecordColumns = {
  userId: users.id,
  email: users.email,
  name: users.name,
  pool: users.pool,
  role: tenantMemberships.role,
  active: sql<boolean>`(${tenantMemberships.status} = 'Active' and ${users.status} = 'Active')`,
  externalId: scimUsers.externalId,
  userName: scimUsers.userName,
  attributes: scimUsers.attributes,
  version: scimUsers.version,
  createdAt: tenantMemberships.createdAt,
  updatedAt: sql<Date>`coalesce(${scimUsers.updatedAt}, ${users.updatedAt})`.mapWith(
    (value: string | Date) => new Date(value),
  ),
};

const emailsOf = sql`coalesce(${scimUsers.attributes}->'emails', jsonb_build_array(jsonb_build_object('value', ${users.email}, 'type', 'work', 'primary', true)))`;
const text = (expr: SQL, caseExact = false): ScalarColumn => ({
  kind: "scalar",
  expr,
  type: "string",
  caseExact,
});
const element = (name: string): ScalarColumn | undefined =>
  name === "primary"
    ? { kind: "scalar", expr: sql`(e.value->>'primary')::boolean`, type: "boolean" }
    : ["value", "type", "display"].includes(name)
      ? text(sql`(e.value->>${name})`)
      : undefined;

/** What a Users filter may name (RFC 7644 §3.4.2.2), as SQL over `userRecordColumns`' tables. */
export const userFilterColumns: FilterColumns = {
  id: text(sql`${users.id}::text`, true),
  username: text(sql`coalesce(${scimUsers.userName}, ${users.email})`),
  externalid: text(sql`${scimUsers.externalId}`, true),
  displayname: text(sql`coalesce(${scimUsers.attributes}->>'displayName', nullif(${users.name}, ''))`),
  "name.givenname": text(sql`(${scimUsers.attributes}->'name'->>'givenName')`),
  "name.familyname": text(sql`(${scimUsers.attributes}->'name'->>'familyName')`),
  "name.formatted": text(sql`(${scimUsers.attributes}->'name'->>'formatted')`),
  active: {
    kind: "scalar",
    expr: sql`(${tenantMemberships.status} = 'Active' and ${users.status} = 'Active')`,
    type: "boolean",
  },
  emails: {
    kind: "multi",
    primary: "value",
    exists: (cond) => sql`exists (select 1 from jsonb_array_elements(${emailsOf}) e where ${cond})`,
    sub: element,
  },
  "meta.created": { kind: "scalar", expr: sql`${tenantMemberships.createdAt}`, type: "date" },
  "meta.lastmodified": {
    kind: "scalar",
    expr: sql`coalesce(${scimUsers.updatedAt}, ${users.updatedAt})`,
    type: "date",
  },
};

/** Attribute names Plinth keeps in its own columns, never among the stored attributes. */
const OWN = new Set(["schemas", "id", "meta", "username", "externalid", "active", "groups", "password"]);

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

/** A User resource's body (POST, PUT, or the result of a PATCH), checked and split up. */
export interface UserInput {
  userName: string;
  email: string;
  externalId: string | null;
  active: boolean;
  /** The identity's name: displayName, else name.formatted, else given and family name. */
  displayName: string;
  attributes: Record<string, unknown>;
}

function field(body: Record<string, unknown>, name: string): unknown {
  const key = Object.keys(body).find((k) => k.toLowerCase() === name.toLowerCase());
  return key === undefined ? undefined : body[key];
}

function booleanOf(value: unknown): boolean {
  if (value === undefined || value === null) return true;
  if (typeof value === "boolean") return value;
  if (typeof value === "string" && /^(true|false)$/i.test(value)) return value.toLowerCase() === "true";
  throw invalidValue('"active" is a boolean.');
}

function nameOf(attributes: Record<string, unknown>, email: string): string {
  const display = field(attributes, "displayName");
  const name = field(attributes, "name") as Record<string, unknown> | undefined;
  const formatted = name && typeof name === "object" ? field(name, "formatted") : undefined;
  const parts =
    name && typeof name === "object"
      ? [field(name, "givenName"), field(name, "familyName")].filter((p) => typeof p === "string" && p)
      : [];
  const chosen =
    typeof display === "string" && display.trim()
      ? display
      : typeof formatted === "string" && formatted.trim()
        ? formatted
        : parts.length > 0
          ? parts.join(" ")
          : (email.split("@")[0] ?? email);
  return chosen.trim().slice(0, 200);
}

/** Checks a User body: the core schema, a `userName` that is an e-mail address (RFC 7643 §4.1). */
export function parseUser(body: unknown): UserInput {
  if (!body || typeof body !== "object" || Array.isArray(body))
    throw new ScimError("validation_failed", "The body is a User resource.", "invalidSyntax");
  const resource = body as Record<string, unknown>;
  const schemas = field(resource, "schemas");
  if (
    !Array.isArray(schemas) ||
    !schemas.some((s) => typeof s === "string" && s.toLowerCase() === USER_SCHEMA.toLowerCase())
  )
    throw new ScimError("validation_failed", `"schemas" lists ${USER_SCHEMA}.`, "invalidSyntax");
  const userName = field(resource, "userName");
  if (typeof userName !== "string" || !userName.trim()) throw invalidValue('"userName" is required.');
  const email = userName.trim().toLowerCase();
  if (email.length > 320 || !EMAIL.test(email))
    throw invalidValue('"userName" is the member\'s e-mail address.');
  const externalId = field(resource, "externalId");
  if (externalId !== undefined && externalId !== null && typeof externalId !== "string")
    throw invalidValue('"externalId" is a string.');
  const attributes = Object.fromEntries(
    Object.entries(resource).filter(([key]) => !OWN.has(key.toLowerCase())),
  );
  if (JSON.stringify(attributes).length > 32_000)
    throw invalidValue("The resource's attributes are too large.");
  return {
    userName: userName.trim(),
    email,
    externalId: typeof externalId === "string" && externalId ? externalId : null,
    active: booleanOf(field(resource, "active")),
    displayName: nameOf(attributes, email),
    attributes,
  };
}

/** The User resource of a record (RFC 7643 §4.1), with its meta. */
export function userResource(record: UserRecord, base: string): Record<string, unknown> {
  const attributes = record.attributes ?? {};
  const has = (name: string) => field(attributes, name) !== undefined;
  return {
    ...attributes,
    schemas: has(ENTERPRISE_USER_SCHEMA) ? [USER_SCHEMA, ENTERPRISE_USER_SCHEMA] : [USER_SCHEMA],
    id: record.userId,
    ...(record.externalId !== null ? { externalId: record.externalId } : {}),
    userName: record.userName ?? record.email,
    ...(!has("name") && record.name ? { name: { formatted: record.name } } : {}),
    ...(!has("displayName") && record.name ? { displayName: record.name } : {}),
    ...(!has("emails") ? { emails: [{ value: record.email, type: "work", primary: true }] } : {}),
    active: record.active,
    meta: {
      resourceType: "User",
      created: record.createdAt.toISOString(),
      lastModified: record.updatedAt.toISOString(),
      location: `${base}/scim/v2/Users/${record.userId}`,
      version: `W/"${record.version ?? 0}"`,
    },
  };
}
