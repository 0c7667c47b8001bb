import { expect, test } from "bun:test";
import { stopChildren, tracked } from "../helpers/children.ts";

// The teardown every file gets from the harness: a child a test left running is stopped.

test("a tracked child still running is stopped with SIGTERM", async () => {
  const child = tracked(Bun.spawn(["sleep", "60"], { stdout: "ignore", stderr: "ignore" }));
  await stopChildren();
  expect(await child.exited).not.toBe(0);
  expect(child.signalCode).toBe("SIGTERM");
});

test("a child that ignores SIGTERM is killed once the grace has passed", async () => {
  const child = tracked(
    Bun.spawn(
      ["bun", "-e", 'process.on("SIGTERM", () => {}); console.log("up"); setInterval(() => {}, 1000);'],
      {
        stdout: "pipe",
        stderr: "ignore",
      },
    ),
  );
  // its SIGTERM handler is in place once it has said so
  await child.stdout.getReader().read();
  await stopChildren(200);
  await child.exited;
  expect(child.signalCode).toBe("SIGKILL");
});

test("an exited child is left alone", async () => {
  const child = tracked(Bun.spawn(["true"]));
  expect(await child.exited).toBe(0);
  await stopChildren();
  expect(child.signalCode).toBeNull();
});
