import { closeSync, openSync, readFileSync, rmSync, writeSync } from "node:fs";

/** Whether a process with this id exists (EPERM: it does, owned by another user). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Directories this process holds (a lock file with our own pid that is not here is stale: exec). */
const held = new Set<string>();

/**
 * Claims an embedded-database directory for this process with `<dir>.lock` (the holder's pid), so
 * a second process fails at once, naming the directory and the holder, instead of opening the same
 * files. A lock left by a process that is gone is taken over. Returns the release function.
 */
export function lockDirectory(dir: string): () => void {
  const path = `${dir}.lock`;
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const fd = openSync(path, "wx", 0o600);
      writeSync(fd, `${process.pid}\n`);
      closeSync(fd);
      held.add(path);
      let released = false;
      return () => {
        if (released) return;
        released = true;
        held.delete(path);
        rmSync(path, { force: true });
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    }
    let holder = Number.NaN;
    try {
      holder = Number.parseInt(readFileSync(path, "utf8").trim(), 10);
    } catch {
      // removed in between: try again
    }
    const ours = holder === process.pid;
    if (Number.isInteger(holder) && holder > 0 && (ours ? held.has(path) : alive(holder))) {
      throw new Error(
        `embedded database ${dir} is in use by process ${holder}${holder === process.pid ? " (this one)" : ""} (lock file ${path}); PGlite opens a directory in one process at a time: stop that process, or use PostgreSQL (DATABASE_URL) for several`,
      );
    }
    // the holder is gone (crash, kill -9, or this pid before an exec): its lock is stale
    rmSync(path, { force: true });
  }
  throw new Error(`embedded database ${dir}: could not take the lock file ${path}`);
}
