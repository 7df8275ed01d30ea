-- Sluice token bucket, all-or-nothing over several keys: the items are decided one after
-- another with the math of lua/token_bucket.lua, and written only if every one allows.
-- KEYS[1..n]   the buckets (a missing key is a full bucket; the state: lua/prelude.lua); a
--              key may appear more than once: its items then spend from that one bucket, in order
-- ARGV[3i-2]   capacity of KEYS[i] in micro-tokens (1 token = 1e6 ut)
-- ARGV[3i-1]   refill rate of KEYS[i] in micro-tokens per millisecond, >= 1
-- ARGV[3i]     cost of KEYS[i] in micro-tokens, 1e6..capacity
-- ARGV[3n+1]   optional "now" in ms, for tests that replay a history; default: Redis TIME
-- Reply:       n arrays {allowed 0|1, remaining whole tokens, retry_after_ms, reset_after_ms},
--              in KEYS order. If all allow: each as decided in sequence, and every bucket is
--              written (PX = reset_after_ms of its last item). Otherwise nothing is written:
--              remaining and reset_after_ms describe each bucket as it is, retry_after_ms is
--              0 for an item that would have allowed and exact for a denying one.
-- The math mirrors token_bucket_decide_all in src/algorithm/token_bucket.cpp; every quantity
-- stays below 2^53, so Lua's doubles are exact. One GET per distinct key, one SET per key.
-- A key that holds anything but a bucket state fails the whole call (the error
-- 'sluice: malformed bucket state', or Redis' WRONGTYPE), before anything is written.
local n = #KEYS
local now = sluice_now(ARGV[3 * n + 1])

-- A stored state (or false: none) brought up to now, as token_bucket.lua does.
local function refill(s, cap, rate)
  if not s then
    return cap, now
  end
  return sluice_refill(s[1], s[2], cap, rate, now)
end

local stored, work, ttl, order, reply = {}, {}, {}, {}, {}
local all = true
for i = 1, n do
  local k = KEYS[i]
  local cap, rate, cost = tonumber(ARGV[3 * i - 2]), tonumber(ARGV[3 * i - 1]), tonumber(ARGV[3 * i])
  if stored[k] == nil then
    local s = false
    local v = redis.call('GET', k)
    if v then
      local level, ts = sluice_parse(v)
      if not level then
        return redis.error_reply(sluice_malformed)
      end
      s = {level, ts}
    end
    stored[k] = s
    work[k] = s
    order[#order + 1] = k
  end
  local level, ts = refill(work[k], cap, rate)
  if level >= cost then
    level = level - cost
    work[k] = {level, ts}
    local reset = math.ceil((cap - level) / rate)
    ttl[k] = reset
    reply[i] = {1, math.floor(level / 1000000), 0, reset}
  else
    all = false
    reply[i] = {0, math.floor(level / 1000000), math.ceil((cost - level) / rate),
                math.ceil((cap - level) / rate)}
  end
end

if all then
  for _, k in ipairs(order) do
    redis.call('SET', k, sluice_format(work[k][1], work[k][2]), 'PX', string.format('%d', ttl[k]))
  end
  return reply
end
for i = 1, n do
  local cap, rate = tonumber(ARGV[3 * i - 2]), tonumber(ARGV[3 * i - 1])
  local level = refill(stored[KEYS[i]], cap, rate)
  reply[i][2] = math.floor(level / 1000000)
  reply[i][4] = math.ceil((cap - level) / rate)
end
return reply
