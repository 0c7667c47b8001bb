/**
 * A Markdown table with its columns padded to one width, as the formatter (Biome) writes tables: the
 * generated docs (docs/roles.md, docs/audit.md's action table) are then already formatted.
 */
export function markdownTable(header: readonly string[], rows: readonly (readonly string[])[]): string[] {
  const all = [header, ...rows].map((row) => header.map((_, i) => (row[i] ?? "").replaceAll("|", "\\|")));
  const widths = header.map((_, i) => Math.max(3, ...all.map((row) => row[i]?.length ?? 0)));
  const line = (row: readonly string[]) =>
    `| ${widths.map((width, i) => (row[i] ?? "").padEnd(width)).join(" | ")} |`;
  return [
    line(all[0] ?? []),
    `| ${widths.map((width) => "-".repeat(width)).join(" | ")} |`,
    ...all.slice(1).map(line),
  ];
}
