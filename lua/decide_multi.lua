-- Sluice all-or-nothing over several keys, mixing algorithms: the items are decided one
-- after another with lua/prelude.lua's math, and written only if every one allows.
-- KEYS[1..n]   the keys (see lua/decide.lua); a key may appear more than once: its items
--              then spend from that one state, in order (they share its algorithm)
-- ARGV[4i-3..4i] algorithm, a, b, cost of KEYS[i] (lua/prelude.lua)
-- ARGV[4n+1]   optional "now" in ms, for tests that replay a history; default: Redis TIME
-- Reply:       n arrays {allowed 0|1, remaining whole units, retry_after_ms, reset_after_ms},
--              in KEYS order. If all allow: each as decided in sequence, and every key is
--              written (PX from its last item). Otherwise nothing is written: remaining and
--              reset_after_ms describe each key as it is, retry_after_ms is 0 for an item
--              that would have allowed and exact for a denying one.
-- The math mirrors limit_decide_all in src/algorithm/limit.cpp. One GET per distinct key,
-- one SET per key. A key that holds no Sluice state fails the whole call (the error
-- 'sluice: malformed bucket state', or Redis' WRONGTYPE), before anything is written.
local n = #KEYS
local now = sluice_now(ARGV[4 * n + 1])

local function arg(i, k)
  return tonumber(ARGV[4 * i - 4 + k])
end

-- Per key: its state as stored and as the items so far left it, each {x, y, z}.
local stored, work, ttl, order, reply = {}, {}, {}, {}, {}
local all = true
for i = 1, n do
  local k = KEYS[i]
  local algo = arg(i, 1)
  if stored[k] == nil then
    local x, y, z = sluice_load(algo, redis.call('GET', k))
    if x == nil then
      return redis.error_reply(sluice_malformed)
    end
    stored[k] = {x, y, z}
    work[k] = stored[k]
    order[#order + 1] = k
  end
  local w = work[k]
  local ok, left, retry, reset, n1, n2, n3 =
    sluice_decide(algo, w[1], w[2], w[3], arg(i, 2), arg(i, 3), arg(i, 4), now)
  if n1 then
    work[k] = {n1, n2, n3}
    ttl[k] = {algo, reset}
  else
    all = false
  end
  reply[i] = {ok, left, retry, reset}
end

if all then
  for _, k in ipairs(order) do
    local algo, reset, w = ttl[k][1], ttl[k][2], work[k]
    redis.call('SET', k, sluice_format(algo, w[1], w[2], w[3]), 'PX', sluice_ttl(algo, reset))
  end
  return reply
end
-- Nothing is spent: report every key as it is.
for i = 1, n do
  local st = stored[KEYS[i]]
  local _, left, _, reset =
    sluice_decide(arg(i, 1), st[1], st[2], st[3], arg(i, 2), arg(i, 3), arg(i, 4), now, true)
  reply[i][2], reply[i][4] = left, reset
end
return reply
