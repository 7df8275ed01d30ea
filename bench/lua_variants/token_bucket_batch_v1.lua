-- Measured for comparison, not used by Sluice: lua/token_bucket_batch.lua as it was before
-- one MGET, runs of parameters, a flat reply and integer formatting made it cheaper.
-- Sluice token bucket over a batch: n independent decisions in one call, each exactly as
-- lua/token_bucket.lua would make it on its own, in KEYS order. The connection coalesces
-- concurrent checks into one call, so one EVALSHA and one TIME serve all of them.
-- KEYS[1..n]   the buckets (strings "level_ut ts_ms"; a missing key is a full bucket); a key
--              may appear more than once: a later item sees what an earlier one wrote
-- ARGV[3i-2]   capacity of KEYS[i] in micro-tokens (1 token = 1e6 ut)
-- ARGV[3i-1]   refill rate of KEYS[i] in micro-tokens per millisecond, >= 1
-- ARGV[3i]     cost of KEYS[i] in micro-tokens, 1e6..capacity
-- ARGV[3n+1]   optional "now" in ms, for tests that replay a history; default: Redis TIME
-- Reply:       n items in KEYS order, each {allowed 0|1, remaining whole tokens,
--              retry_after_ms, reset_after_ms} or, for that item alone, an error (a bucket
--              that is not a Sluice state): one bad key never fails the others.
local n = #KEYS
local now
if ARGV[3 * n + 1] then
  now = tonumber(ARGV[3 * n + 1])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local written = {}  -- key -> state string set by an earlier item of this batch
local out = {}
for i = 1, n do
  local key = KEYS[i]
  local cap = tonumber(ARGV[3 * i - 2])
  local rate = tonumber(ARGV[3 * i - 1])
  local cost = tonumber(ARGV[3 * i])
  -- pcall: a key of another type (WRONGTYPE) is this item's error, not the batch's.
  local v = written[key] or redis.pcall('GET', key)
  local level, ts = cap, now
  local bad
  if type(v) == 'table' then
    bad = v
  elseif v then
    local sp = string.find(v, ' ', 1, true)
    local l = sp and tonumber(string.sub(v, 1, sp - 1))
    local t = sp and tonumber(string.sub(v, sp + 1))
    if not (l and t) then
      bad = redis.error_reply('sluice: malformed bucket state')
    else
      level = math.min(cap, l)
      ts = t
      if now > ts then
        level = math.min(cap, level + (now - ts) * rate)
        ts = now
      end
    end
  end
  if bad then
    out[i] = bad
  elseif level >= cost then
    level = level - cost
    local reset = math.ceil((cap - level) / rate)
    local s = string.format('%.0f %.0f', level, ts)
    redis.call('SET', key, s, 'PX', reset)
    written[key] = s
    out[i] = {1, math.floor(level / 1000000), 0, reset}
  else
    out[i] = {0, math.floor(level / 1000000), math.ceil((cost - level) / rate),
              math.ceil((cap - level) / rate)}
  end
end
return out
