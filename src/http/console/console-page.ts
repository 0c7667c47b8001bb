import type { Hono } from "hono";
import type { Deps } from "../../deps.ts";
import type { ConsoleSection } from "./layout.ts";
import type { ConsoleEnv } from "./session.ts";

/** A console page: its section of the navigation and its routes (the page, its parts, its form posts). */
export interface ConsolePage extends ConsoleSection {
  routes: (deps: Deps) => Hono<ConsoleEnv>;
  /** Mounted (and in the navigation) in Development only. */
  developmentOnly?: true;
}
