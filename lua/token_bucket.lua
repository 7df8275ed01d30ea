-- Sluice token bucket: one atomic decision (read, refill, decide, write) on one key.
-- KEYS[1]  the bucket (a missing key is a full bucket; the state's format: lua/prelude.lua)
-- ARGV[1]  capacity in micro-tokens (1 token = 1e6 ut)
-- ARGV[2]  refill rate in micro-tokens per millisecond (= milli-tokens per second), >= 1
-- ARGV[3]  cost in micro-tokens, 1e6..capacity
-- ARGV[4]  optional "now" in ms, for tests that replay a history; default: Redis TIME
-- Reply:   {allowed 0|1, remaining whole tokens, retry_after_ms, reset_after_ms}, or the
--          error 'sluice: malformed bucket state' when the key holds something else
-- The math mirrors src/algorithm/token_bucket.cpp; a denial writes nothing, since refill
-- is linear.
local cap = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local now = sluice_now(ARGV[4])

local level, ts = cap, now
local v = redis.call('GET', KEYS[1])
if v then
  level, ts = sluice_parse(v)
  if not level then
    return redis.error_reply(sluice_malformed)
  end
  level, ts = sluice_refill(level, ts, cap, rate, now)
end

if level >= cost then
  level = level - cost
  local reset = math.ceil((cap - level) / rate)
  redis.call('SET', KEYS[1], sluice_format(level, ts), 'PX', string.format('%d', reset))
  return {1, math.floor(level / 1000000), 0, reset}
end
return {0, math.floor(level / 1000000), math.ceil((cost - level) / rate),
        math.ceil((cap - level) / rate)}
