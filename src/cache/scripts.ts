import { createHash } from "node:crypto";

/** A Lua script run atomically by the cache (EVALSHA, falling back to EVAL on NOSCRIPT). */
export interface CacheScript {
  readonly name: string;
  readonly source: string;
  readonly sha1: string;
}

export function defineScript(name: string, source: string): CacheScript {
  return { name, source, sha1: createHash("sha1").update(source).digest("hex") };
}

/** INCRBY with a TTL set only when the key has none, so a counter's window starts at its first write. */
export const incrByScript = defineScript(
  "incrby-ttl",
  `local v = redis.call('INCRBY', KEYS[1], ARGV[1])
local ttl = tonumber(ARGV[2])
if ttl > 0 and redis.call('TTL', KEYS[1]) == -1 then redis.call('EXPIRE', KEYS[1], ttl) end
return v`,
);

/**
 * Sliding-log windows over one or more keys (e.g. account, account and address, client IP), in one
 * round trip. ARGV: now (ms), mode (check | hit | consume), member id, then per key: limit, window
 * (ms), and the slow-down (after, base ms, max ms; after 0: none). An attempt at t counts until
 * t + window. A key refuses when it holds `limit` attempts (until the oldest that matters leaves the
 * window), or, slowed, when it holds at least `after` and the newest is less than
 * min(max, base * 2^(count - after)) old. Returns { allowed (1/0), retry-after ms, count per key...,
 * wait ms per key... }. `consume` records on every key only when every key allows; `hit` records
 * unconditionally. An attempt stamped more than a minute ahead of now (by a clock since put back:
 * `CLOCK_STEP_BACK_MS`) counts as made now.
 */
export const slidingLogScript = defineScript(
  "sliding-log-slow",
  `local now = tonumber(ARGV[1])
local mode = ARGV[2]
local id = ARGV[3]
local retry = 0
local blocked = false
local counts = {}
local waits = {}
for i, key in ipairs(KEYS) do
  local at = 3 + 5 * (i - 1)
  local limit = tonumber(ARGV[at + 1])
  local window = tonumber(ARGV[at + 2])
  local after = tonumber(ARGV[at + 3])
  local base = tonumber(ARGV[at + 4])
  local maxDelay = tonumber(ARGV[at + 5])
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  for _, ahead in ipairs(redis.call('ZRANGEBYSCORE', key, string.format('(%d', now + 60000), '+inf')) do
    redis.call('ZADD', key, now, ahead)
  end
  local count = redis.call('ZCARD', key)
  counts[i] = count
  local wait = 0
  if count >= limit then
    local oldest = redis.call('ZRANGE', key, count - limit, count - limit, 'WITHSCORES')
    wait = tonumber(oldest[2]) + window - now
  elseif after > 0 and count >= after then
    local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
    local delay = math.min(maxDelay, base * 2 ^ (count - after))
    wait = tonumber(newest[2]) + delay - now
    if wait < 0 then wait = 0 end
  end
  wait = math.ceil(wait)
  waits[i] = wait
  if wait > 0 then
    blocked = true
    if wait > retry then retry = wait end
  end
end
if mode == 'hit' or (mode == 'consume' and not blocked) then
  for i, key in ipairs(KEYS) do
    local window = tonumber(ARGV[3 + 5 * (i - 1) + 2])
    redis.call('ZADD', key, now, id)
    redis.call('PEXPIRE', key, window)
    counts[i] = counts[i] + 1
  end
end
local out = { blocked and 0 or 1, retry }
for i = 1, #counts do out[#out + 1] = counts[i] end
for i = 1, #waits do out[#out + 1] = waits[i] end
return out`,
);

/**
 * Takes back one attempt recorded by the sliding-log script: on each key, removes one member whose
 * score is exactly ARGV[1] (the `now` it was recorded at). Attempts already outside their window
 * are gone anyway; nothing else is touched. Returns the number of members removed.
 */
export const slidingLogRefundScript = defineScript(
  "sliding-log-refund",
  `local at = ARGV[1]
local removed = 0
for _, key in ipairs(KEYS) do
  local members = redis.call('ZRANGEBYSCORE', key, at, at, 'LIMIT', 0, 1)
  if #members > 0 then removed = removed + redis.call('ZREM', key, members[1]) end
end
return removed`,
);

/**
 * GCRA (a token bucket kept as one "theoretical arrival time", TAT). ARGV: now, emission interval
 * (time per permit) and window (the bucket's capacity: limit * interval, which the caller passes so
 * a burst is exactly the limit), all in microseconds, and how many permits are asked for at once.
 * Grants as many as n requests one after another at `now` would get: up to
 * floor((window - (TAT - now)) / interval). Returns { permits granted, TAT - now (µs) before them }.
 * The key expires when the bucket is full again (PX takes milliseconds). A TAT more than a window and
 * a minute ahead was written by a clock since put back (`CLOCK_STEP_BACK_MS`): the bucket starts
 * again full.
 */
export const gcraScript = defineScript(
  "gcra-n",
  `local now = tonumber(ARGV[1])
local interval = tonumber(ARGV[2])
local window = tonumber(ARGV[3])
local count = tonumber(ARGV[4])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now or tat - now > window + 60000000 then tat = now end
local granted = math.floor((window - (tat - now)) / interval)
if granted > count then granted = count end
if granted < 0 then granted = 0 end
if granted > 0 then
  local next = tat + granted * interval
  redis.call('SET', KEYS[1], string.format('%d', next), 'PX', string.format('%d', math.ceil((next - now) / 1000)))
end
return { granted, tat - now }`,
);

/**
 * Read-through write-back guarded by a generation: KEYS[1] the entry, KEYS[2] its generation;
 * ARGV: the generation the reader saw before loading ('' for none), the value, the TTL in seconds
 * (0: none). Writes only when the generation is unchanged, i.e. no invalidation ran while the
 * reader was loading. Returns 1 when written, 0 when skipped.
 */
export const setIfGenerationScript = defineScript(
  "set-if-generation",
  `local g = redis.call('GET', KEYS[2])
if (g or '') ~= ARGV[1] then return 0 end
local ttl = tonumber(ARGV[3])
if ttl > 0 then redis.call('SET', KEYS[1], ARGV[2], 'EX', ttl) else redis.call('SET', KEYS[1], ARGV[2]) end
return 1`,
);

/**
 * Invalidation of read-through entries: KEYS are pairs (entry, its generation). Deletes each entry
 * and bumps its generation in one step, so a load that started before cannot write back.
 */
export const invalidateScript = defineScript(
  "invalidate-generation",
  `for i = 1, #KEYS, 2 do
  redis.call('DEL', KEYS[i])
  redis.call('INCR', KEYS[i + 1])
end
return #KEYS / 2`,
);
