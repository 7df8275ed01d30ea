-- Sluice token bucket: one atomic decision (read, refill, decide, write) on one key.
-- KEYS[1]  the bucket (a string "level_ut ts_ms"; a missing key is a full bucket)
-- ARGV[1]  capacity in micro-tokens (1 token = 1e6 ut)
-- ARGV[2]  refill rate in micro-tokens per millisecond (= milli-tokens per second), >= 1
-- ARGV[3]  cost in micro-tokens, 1e6..capacity
-- ARGV[4]  optional "now" in ms, for tests that replay a history; default: Redis TIME
-- Reply:   {allowed 0|1, remaining whole tokens, retry_after_ms, reset_after_ms}
-- The math mirrors src/algorithm/token_bucket.cpp. Every quantity stays below 2^53, so
-- Lua's doubles are exact; a denial writes nothing, since refill is linear.
local cap = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local now
if ARGV[4] then
  now = tonumber(ARGV[4])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local level, ts = cap, now
local v = redis.call('GET', KEYS[1])
if v then
  local sp = string.find(v, ' ', 1, true)
  if not sp then
    return redis.error_reply('sluice: malformed bucket state')
  end
  level = math.min(cap, tonumber(string.sub(v, 1, sp - 1)))
  ts = tonumber(string.sub(v, sp + 1))
  if now > ts then
    level = math.min(cap, level + (now - ts) * rate)
    ts = now
  end
end

if level >= cost then
  level = level - cost
  local reset = math.ceil((cap - level) / rate)
  -- '%d', not '%.0f' or a Lua number: integer formatting costs Redis a fraction of the
  -- floating-point kind, and every quantity is a whole number below 2^53.
  redis.call('SET', KEYS[1], string.format('%d %d', level, ts), 'PX', string.format('%d', reset))
  return {1, math.floor(level / 1000000), 0, reset}
end
return {0, math.floor(level / 1000000), math.ceil((cost - level) / rate),
        math.ceil((cap - level) / rate)}
