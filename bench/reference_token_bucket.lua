-- The reference token bucket: the script of the seed post "Rate Limiting in Go with Redis and
-- Lua: A Token Bucket That Doesn't Race" (../shared/seed/), copied unchanged but for these
-- comments. scripts/bench measures it beside lua/decide.lua; Sluice does not use it.
-- KEYS[1]  the bucket (a hash with fields tokens, ts)
-- ARGV[1]  capacity (tokens)   ARGV[2]  refill per second   ARGV[3]  tokens requested
-- Reply:   {allowed 0|1, floor(tokens)}
local key = KEYS[1]
local capacity = tonumber(ARGV[1])
local refill_per_sec = tonumber(ARGV[2])
local requested = tonumber(ARGV[3])

local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local data = redis.call("HMGET", key, "tokens", "ts")
local tokens = tonumber(data[1])
local ts = tonumber(data[2])

if tokens == nil then
  tokens = capacity
  ts = now
end

local elapsed = math.max(0, now - ts)
tokens = math.min(capacity, tokens + (elapsed / 1000) * refill_per_sec)

local allowed = 0
if tokens >= requested then
  tokens = tokens - requested
  allowed = 1
end

redis.call("HSET", key, "tokens", tokens, "ts", now)
-- expire idle keys after twice the time it takes to refill fully
redis.call("PEXPIRE", key, math.ceil(capacity / refill_per_sec * 1000) * 2)

return { allowed, math.floor(tokens) }
