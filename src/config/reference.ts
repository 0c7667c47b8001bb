import { environmentOverrides } from "./schema.ts";
import { describeType, leafKeys } from "./tree.ts";

function formatDefault(value: unknown): string {
  if (value === undefined) return "—";
  if (Array.isArray(value) && value.length === 0) return "empty";
  return `\`${JSON.stringify(value)}\``;
}

/** docs/configuration.md, generated from the schema (`bun run docs:config`); a test keeps them equal. */
export function renderConfigReference(): string {
  const overridesByKey = new Map<string, string[]>();
  for (const [variable, key] of Object.entries(environmentOverrides)) {
    overridesByKey.set(key, [...(overridesByKey.get(key) ?? []), variable]);
  }
  const lines = [
    "# Configuration reference",
    "",
    "<!-- Generated from src/config/schema.ts by `bun run docs:config`. Do not edit by hand. -->",
    "",
    "Sources, lowest precedence first: `config/appsettings.json`, `config/appsettings.{Environment}.json`,",
    "environment variables (`Section__Key`, or `Section:Key` where the environment allows a colon; arrays `Key__0`, case-insensitive; a `;`-separated value also",
    "fills an array), then the override variables named below, then command-line overrides. The",
    "environment comes from `PLINTH_ENVIRONMENT` (`Development` | `Staging` | `Production`; default",
    "`Development`). Keys marked secret are never printed: not in logs, errors or `--help`.",
    "",
    "Database: `ConnectionStrings:Database`, else `DATABASE_URL`, else (Development only)",
    "`postgres://<OS user>@localhost:5432/plinth` (or embedded PGlite with `--embedded`). Cache:",
    "`ConnectionStrings:Cache`, else `CACHE_URL`; required in Production.",
    "",
    "| key | type | default | secret | description |",
    "| --- | --- | --- | --- | --- |",
  ];
  for (const { key, node } of leafKeys()) {
    const variables = overridesByKey.get(key);
    const description = [
      node.description ?? "",
      variables ? `Override: ${variables.map((v) => `\`${v}\``).join(", ")}.` : "",
    ]
      .filter(Boolean)
      .join(" ")
      .replaceAll("|", "\\|");
    lines.push(
      `| \`${key}\` | ${describeType(node)} | ${formatDefault(node.default)} | ${node.secret ? "yes" : ""} | ${description} |`,
    );
  }
  return `${lines.join("\n")}\n`;
}
