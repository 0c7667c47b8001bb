export * from "./data-protection.ts";
export * from "./domains.ts";
export * from "./identity.ts";
export * from "./jobs.ts";
export * from "./providers.ts";
export * from "./secrets.ts";
export * from "./security.ts";
export * from "./tenants.ts";
