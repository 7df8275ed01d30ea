-- Sluice over a batch: n independent steps (checks, or key operations) in one call, each
-- exactly as lua/decide.lua would make it on its own, in KEYS order. The connection coalesces concurrent checks into
-- one call, so one EVALSHA, one TIME and one MGET serve all of them.
-- KEYS[1..n]   the keys (see lua/decide.lua); a key may appear more than once: a later item
--              sees what an earlier one wrote
-- ARGV[1]      "now" in ms, for tests that replay a history; "" for Redis TIME
-- ARGV[2..]    runs of items with the same parameters, in KEYS order, each five values:
--              item count, algorithm + 8 x step, a, b, cost (lua/decide.lua, lua/prelude.lua).
--              A batch is mostly checks
--              of one policy, so this is 5 arguments, not 4n.
-- Reply:       4n values, item i at 4i-3..4i: allowed 0|1, remaining whole units,
--              retry_after_ms, reset_after_ms; or, for that item alone, an error (a key that
--              holds no Sluice state) at 4i-3 and three zeros: one bad key never fails the
--              others. One flat array, because Redis converts every nested table of a reply
--              separately, which cost more than the decision itself.
-- Why it is written this way: per decision, Redis CPU goes mostly to the redis.call()s and
-- to number <-> text conversions, so the keys are read by one MGET, the state and the TTL
-- are formatted as integers, and each run's parameters are converted once.
local n = #KEYS
local now = sluice_now(ARGV[1])

-- MGET answers nil for a key of another type as for a missing one; such a key is told
-- apart when it is written (SET NX below), or by EXISTS when a denial leaves it unwritten.
local stored = redis.call('MGET', unpack(KEYS))
local written = {}  -- key -> state string set (false: deleted) by an earlier item
local out = {}
local wrongtype = 'WRONGTYPE Operation against a key holding the wrong kind of value'
local at, left_in_run, algo, op, a, b, cost = 2, 0
for i = 1, n do
  if left_in_run == 0 then
    local code
    left_in_run, code, a, b, cost = tonumber(ARGV[at]), tonumber(ARGV[at + 1]),
      tonumber(ARGV[at + 2]), tonumber(ARGV[at + 3]), tonumber(ARGV[at + 4])
    algo, op = code % 8, math.floor(code / 8)
    at = at + 5
  end
  left_in_run = left_in_run - 1
  local key = KEYS[i]
  local v = written[key]
  if v == nil then v = stored[i] end
  local x, y, z = sluice_load(algo, v)
  local bad
  local ok, left, retry, reset, str, px
  if x == nil then
    bad = redis.error_reply(sluice_malformed)
  else
    if op == 0 then
      local n1, n2, n3
      ok, left, retry, reset, n1, n2, n3 = sluice_decide(algo, x, y, z, a, b, cost, now)
      if n1 then
        str, px = sluice_format(algo, n1, n2, n3), sluice_ttl(algo, reset)
      end
    else
      ok, left, retry, reset, str, px = sluice_apply(op, algo, x, y, z, a, b, cost, now)
    end
    if str then
      if v then
        redis.call('SET', key, str, 'PX', px)
      elseif not redis.call('SET', key, str, 'PX', px, 'NX') then
        bad = redis.error_reply(wrongtype)
      end
      if not bad then written[key] = str end
    elseif str == false and v then
      redis.call('DEL', key)
      written[key] = false
    elseif not v and redis.call('EXISTS', key) == 1 then
      -- Nothing written on what MGET saw as missing: tell a key of another type apart.
      bad = redis.error_reply(wrongtype)
    end
  end
  local j = 4 * i
  if bad then
    out[j - 3], out[j - 2], out[j - 1], out[j] = bad, 0, 0, 0
  else
    out[j - 3], out[j - 2], out[j - 1], out[j] = ok, left, retry, reset
  end
end
return out
