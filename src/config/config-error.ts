export interface ConfigProblem {
  /** The configuration key (or variable, or file) at fault; never its value. */
  key: string;
  problem: string;
}

/** Configuration that cannot be used: lists every problem by key. Exit code 1 at start-up. */
export class ConfigError extends Error {
  readonly problems: ConfigProblem[];

  constructor(problems: ConfigProblem[], environment?: string) {
    const head =
      environment === "Production"
        ? `Refusing to start in Production: ${problems.length} configuration problem(s)`
        : `Invalid configuration: ${problems.length} problem(s)`;
    super([head, ...problems.map((p) => `  - ${p.key}: ${p.problem}`)].join("\n"));
    this.name = "ConfigError";
    this.problems = problems;
  }
}
