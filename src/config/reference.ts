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
    "Secrets from files: every secret key's variable (`Section__Key`, and `DATABASE_URL`, `DATABASE_DIRECT_URL`, `CACHE_URL`,",
    "`CACHE_TOKEN` and the secret `PLINTH_*`/`STORAGE_*`/`S3_*` overrides) may instead be given as",
    "`<VARIABLE>_FILE` holding a path (Docker/Kubernetes secrets); one trailing newline is trimmed.",
    "`Security__Jwt__VerificationKeys__N__PublicKey_FILE` works the same way (what `keys:generate --rotate jwt` writes).",
    "Setting both is an error naming both. A PEM value given on one line with literal `\\n` is read",
    "as the multi-line PEM it stands for.",
    "",
    "Unknown keys: a key in a settings file, or a `Section__Key` variable whose first segment is a",
    "known section, that the schema does not know, and a settings file whose name differs from an",
    "expected one only by case, are reported with the closest known key. A warning in Development and",
    "Staging; in Production a refusal like any other problem, unless `Configuration:AllowUnknownKeys`.",
    "",
    "Database: `ConnectionStrings:Database`, else `DATABASE_URL`, else (Development only)",
    "`postgres://<OS user>@localhost:5432/plinth` (or embedded PGlite with `--embedded`). Beside a",
    "transaction pooler: `ConnectionStrings:DatabaseDirect`, else `DATABASE_DIRECT_URL` (docs/scaling.md).",
    "Cache: `ConnectionStrings:Cache`, else `CACHE_URL`; required in Production. A Redis Cluster is",
    "written `redis://host1:port1,host2:port2,host3:port3?cluster=true` (`rediss://` for TLS).",
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
