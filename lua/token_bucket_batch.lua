-- Sluice token bucket over a batch: n independent decisions in one call, each exactly as
-- lua/token_bucket.lua would make it on its own, in KEYS order. The connection coalesces
-- concurrent checks into one call, so one EVALSHA, one TIME and one MGET serve all of them.
-- KEYS[1..n]   the buckets (a missing key is a full bucket; the state: lua/prelude.lua); a
--              key may appear more than once: a later item sees what an earlier one wrote
-- ARGV[1]      "now" in ms, for tests that replay a history; "" for Redis TIME
-- ARGV[2..]    runs of items with the same parameters, in KEYS order, each four values:
--              item count, capacity in micro-tokens (1 token = 1e6 ut), refill rate in
--              micro-tokens per millisecond (>= 1), cost in micro-tokens (1e6..capacity).
--              A batch is mostly checks of one policy, so this is 4 arguments, not 3n.
-- Reply:       4n values, item i at 4i-3..4i: allowed 0|1, remaining whole tokens,
--              retry_after_ms, reset_after_ms; or, for that item alone, an error (a bucket
--              that is not a Sluice state) at 4i-3 and three zeros: one bad key never fails
--              the others. One flat array, because Redis converts every nested table of a
--              reply separately, which cost more than the decision itself.
-- Why it is written this way: per decision, Redis CPU goes mostly to the redis.call()s and
-- to number <-> text conversions, so the keys are read by one MGET, the state and the TTL
-- are formatted as integers ('%d', not the floating-point '%.0f'), and each run's
-- parameters are converted once.
local n = #KEYS
local now = sluice_now(ARGV[1])

-- MGET answers nil for a key of another type as for a missing one; such a key is told
-- apart when it is written (SET NX below), or by EXISTS when a cost above the capacity
-- denies it (the only way a missing key denies).
local stored = redis.call('MGET', unpack(KEYS))
local written = {}  -- key -> state string set by an earlier item of this batch
local out = {}
local a, left, cap, rate, cost = 2, 0
for i = 1, n do
  if left == 0 then
    left, cap, rate, cost =
      tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
    a = a + 4
  end
  left = left - 1
  local key = KEYS[i]
  local v = written[key]
  if v == nil then v = stored[i] end
  local level, ts = cap, now
  local bad
  if v then
    local l, t = sluice_parse(v)
    if not l then
      bad = redis.error_reply(sluice_malformed)
    else
      level, ts = sluice_refill(l, t, cap, rate, now)
    end
  end
  local j = 4 * i
  if not bad and level >= cost then
    level = level - cost
    local reset = math.ceil((cap - level) / rate)
    local s = sluice_format(level, ts)
    local px = string.format('%d', reset)
    if v then
      redis.call('SET', key, s, 'PX', px)
    elseif not redis.call('SET', key, s, 'PX', px, 'NX') then
      bad = redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
    end
    if not bad then
      written[key] = s
      out[j - 3], out[j - 2], out[j - 1], out[j] = 1, math.floor(level / 1000000), 0, reset
    end
  elseif not bad and not v and redis.call('EXISTS', key) == 1 then
    -- Only a cost above the capacity denies on a missing key (the limiter refuses those
    -- before they get here): then this tells a key of another type apart without a write.
    bad = redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
  elseif not bad then
    out[j - 3], out[j - 2], out[j - 1], out[j] = 0, math.floor(level / 1000000),
      math.ceil((cost - level) / rate), math.ceil((cap - level) / rate)
  end
  if bad then
    out[j - 3], out[j - 2], out[j - 1], out[j] = bad, 0, 0, 0
  end
end
return out
