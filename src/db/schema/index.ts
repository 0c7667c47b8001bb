export * from "./domains.ts";
export * from "./identity.ts";
export * from "./jobs.ts";
export * from "./security.ts";
export * from "./tenants.ts";
