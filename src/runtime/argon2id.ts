import { argon2id, argon2Verify } from "hash-wasm";

export interface Argon2idCost {
  memoryKib: number;
  iterations: number;
}

/**
 * argon2id as PHC strings: Bun's native implementation where the process runs under Bun, else
 * hash-wasm (Deno, Node). Both write and read the same strings, so a hash made under one runtime
 * verifies under the other.
 */
export async function hashArgon2id(password: string, cost: Argon2idCost): Promise<string> {
  if (typeof Bun !== "undefined")
    return Bun.password.hash(password, {
      algorithm: "argon2id",
      memoryCost: cost.memoryKib,
      timeCost: cost.iterations,
    });
  return argon2id({
    password,
    salt: crypto.getRandomValues(new Uint8Array(16)),
    parallelism: 1,
    iterations: cost.iterations,
    memorySize: cost.memoryKib,
    hashLength: 32,
    outputType: "encoded",
  });
}

/** Whether `password` matches the PHC string `hash`; throws on a hash it cannot read. */
export async function verifyArgon2id(password: string, hash: string): Promise<boolean> {
  if (typeof Bun !== "undefined") return Bun.password.verify(password, hash);
  return argon2Verify({ password, hash });
}
