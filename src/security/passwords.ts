import { argon2id, argon2Verify } from "hash-wasm";

/** OWASP's argon2id floor: 19 MiB, 2 passes, 1 lane. PHC strings, portable between Bun and Deno. */
const MEMORY_KIB = 19_456;
const ITERATIONS = 2;

export const MIN_PASSWORD_LENGTH = 12;

export async function hashPassword(password: string): Promise<string> {
  if (typeof Bun !== "undefined") {
    return Bun.password.hash(password, {
      algorithm: "argon2id",
      memoryCost: MEMORY_KIB,
      timeCost: ITERATIONS,
    });
  }
  const salt = crypto.getRandomValues(new Uint8Array(16));
  return argon2id({
    password,
    salt,
    parallelism: 1,
    iterations: ITERATIONS,
    memorySize: MEMORY_KIB,
    hashLength: 32,
    outputType: "encoded",
  });
}

export async function verifyPassword(password: string, hash: string): Promise<boolean> {
  try {
    if (typeof Bun !== "undefined") return await Bun.password.verify(password, hash);
    return await argon2Verify({ password, hash });
  } catch {
    return false;
  }
}
