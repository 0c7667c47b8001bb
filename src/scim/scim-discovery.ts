/**
 * The SCIM discovery documents (RFC 7644 §4, RFC 7643 §5–7): what this service provider supports,
 * its resource types and their schemas. The same for every tenant.
 */

export const USER_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:User";
export const GROUP_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:Group";
export const ENTERPRISE_USER_SCHEMA = "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User";
export const LIST_SCHEMA = "urn:ietf:params:scim:api:messages:2.0:ListResponse";
export const ERROR_SCHEMA = "urn:ietf:params:scim:api:messages:2.0:Error";
const SPC_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:ServiceProviderConfig";
const RESOURCE_TYPE_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:ResourceType";
const SCHEMA_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:Schema";

/** The most resources one page returns (`count` above it is cut to it, RFC 7644 §3.4.2.4). */
export const MAX_PAGE = 200;
export const DEFAULT_PAGE = 100;

const meta = (base: string, resourceType: string, path: string) => ({
  resourceType,
  location: `${base}/scim/v2/${path}`,
});

export function serviceProviderConfig(base: string) {
  return {
    schemas: [SPC_SCHEMA],
    documentationUri: `${base}/api/docs`,
    patch: { supported: true },
    bulk: { supported: false, maxOperations: 0, maxPayloadSize: 0 },
    filter: { supported: true, maxResults: MAX_PAGE },
    changePassword: { supported: false },
    sort: { supported: false },
    etag: { supported: false },
    authenticationSchemes: [
      {
        type: "oauthbearertoken",
        name: "Bearer token",
        description: "A tenant's SCIM token (POST /api/tenant/scim/tokens), as Authorization: Bearer.",
        primary: true,
      },
    ],
    meta: meta(base, "ServiceProviderConfig", "ServiceProviderConfig"),
  };
}

export function resourceTypes(base: string) {
  return [
    {
      schemas: [RESOURCE_TYPE_SCHEMA],
      id: "User",
      name: "User",
      endpoint: "/Users",
      description: "A member of the tenant (userName is the e-mail address).",
      schema: USER_SCHEMA,
      schemaExtensions: [{ schema: ENTERPRISE_USER_SCHEMA, required: false }],
      meta: meta(base, "ResourceType", "ResourceTypes/User"),
    },
    {
      schemas: [RESOURCE_TYPE_SCHEMA],
      id: "Group",
      name: "Group",
      endpoint: "/Groups",
      description: "A group of the tenant's members; a group named after a role gives it (docs/scim.md).",
      schema: GROUP_SCHEMA,
      meta: meta(base, "ResourceType", "ResourceTypes/Group"),
    },
  ];
}

type Attribute = Record<string, unknown>;

const attribute = (name: string, more: Attribute = {}): Attribute => ({
  name,
  type: "string",
  multiValued: false,
  required: false,
  caseExact: false,
  mutability: "readWrite",
  returned: "default",
  uniqueness: "none",
  ...more,
});

const multi = (name: string, subAttributes: Attribute[], more: Attribute = {}) =>
  attribute(name, { type: "complex", multiValued: true, subAttributes, ...more });

const valueTypePrimary = [
  attribute("value"),
  attribute("display"),
  attribute("type"),
  attribute("primary", { type: "boolean" }),
];

export function schemas(base: string) {
  return [
    {
      schemas: [SCHEMA_SCHEMA],
      id: USER_SCHEMA,
      name: "User",
      description: "A member of the tenant.",
      attributes: [
        attribute("userName", { required: true, uniqueness: "server" }),
        attribute("name", {
          type: "complex",
          subAttributes: ["formatted", "familyName", "givenName", "middleName"].map((n) => attribute(n)),
        }),
        attribute("displayName"),
        attribute("title"),
        attribute("active", { type: "boolean" }),
        multi("emails", valueTypePrimary),
        multi("phoneNumbers", valueTypePrimary),
        multi(
          "groups",
          [attribute("value", { mutability: "readOnly" }), attribute("display", { mutability: "readOnly" })],
          { mutability: "readOnly" },
        ),
      ],
      meta: meta(base, "Schema", `Schemas/${USER_SCHEMA}`),
    },
    {
      schemas: [SCHEMA_SCHEMA],
      id: ENTERPRISE_USER_SCHEMA,
      name: "EnterpriseUser",
      description: "Enterprise User (kept as sent).",
      attributes: [attribute("employeeNumber"), attribute("department"), attribute("organization")],
      meta: meta(base, "Schema", `Schemas/${ENTERPRISE_USER_SCHEMA}`),
    },
    {
      schemas: [SCHEMA_SCHEMA],
      id: GROUP_SCHEMA,
      name: "Group",
      description: "A group of the tenant's members.",
      attributes: [
        attribute("displayName", { required: true }),
        multi("members", [attribute("value", { mutability: "immutable" }), attribute("display")]),
      ],
      meta: meta(base, "Schema", `Schemas/${GROUP_SCHEMA}`),
    },
  ];
}

/** A ListResponse of `resources`, the page starting at `startIndex` (1-based) of `totalResults`. */
export function listResponse<T>(resources: T[], totalResults: number, startIndex: number) {
  return {
    schemas: [LIST_SCHEMA],
    totalResults,
    startIndex,
    itemsPerPage: resources.length,
    Resources: resources,
  };
}
