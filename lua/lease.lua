-- Sluice quota leases: one instance takes up to `want` units of a limit in one step (a
-- lease), or gives back units of a lease that it did not spend (a return). The same math
-- as src/algorithm/lease.cpp (limit_lease, limit_lease_return), on lua/prelude.lua's.
-- KEYS[1]  the limit's key (as in lua/decide.lua)
-- KEYS[2]  the instances that asked for KEYS[1] lately: a sorted set of instance ids by
--          the time of their last ask, on KEYS[1]'s slot; kept for one ttl
-- ARGV[1]  the algorithm's number + 8 x the step's: 6 a lease, 7 a return
-- ARGV[2], ARGV[3]  the algorithm's a and b (lua/prelude.lua)
-- ARGV[4]  a lease: the cost of the request that asks, in the algorithm's units
-- ARGV[5]  a lease: the whole units wanted; a return: the whole units given back
-- ARGV[6]  a lease: how long a lease may be held, ms; a return: the grant's at_ms
-- ARGV[7]  a lease: the asking instance's id
-- ARGV[8]  optional "now" in ms, for tests that replay a history; default: Redis TIME
-- Reply:   {allowed 0|1, remaining, retry_after_ms, reset_after_ms, granted units,
--          valid_ms, at_ms}: a lease as a check of ARGV[4] sees it, the units debited (0
--          when denied), how long they may be spent and the time a return names; a return
--          answers what a check of one unit sees after it and zeros. Or the error
--          'sluice: malformed bucket state' when KEYS[1] holds no Sluice state.
local code = tonumber(ARGV[1])
local algo, op = code % 8, math.floor(code / 8)
local a, b = tonumber(ARGV[2]), tonumber(ARGV[3])
local now_us = sluice_now(ARGV[8])
local now = math.floor(now_us / 1000)
local v = redis.call('GET', KEYS[1])
local x, y, z = sluice_load(algo, v)
if x == nil then
  return redis.error_reply(sluice_malformed)
end
local unit = sluice_unit(algo, a)
-- Fixed and sliding-counter windows count per window aligned to the epoch.
local aligned = algo == 4 or algo == 3

local function store(ok, left, retry, reset, str, px)
  if str then
    redis.call('SET', KEYS[1], str, 'PX', px)
  elseif str == false and v then
    redis.call('DEL', KEYS[1])
  end
end

if op == 7 then
  local units, granted_at = tonumber(ARGV[5]), tonumber(ARGV[6])
  local peek = function(sx, sy, sz)
    local ok, left, retry, reset = sluice_decide(algo, sx, sy, sz, a, b, unit, now_us, true)
    return {ok, left, retry, reset, 0, 0, 0}
  end
  if units <= 0 or (aligned and math.floor(granted_at / b) ~= math.floor(now / b)) then
    return peek(x, y, z)
  end
  if algo ~= 2 then
    local ok, left, retry, reset, str, px = sluice_apply(3, algo, x, y, z, a, b, units * unit, now_us)
    store(ok, left, retry, reset, str, px)
    return {ok, left, retry, reset, 0, 0, 0}
  end
  -- The log entry the grant wrote, if it is still there.
  if not x or x == 'b' then
    return peek(x, y, z)
  end
  local found = nil
  for i = 1, #x, 2 do
    if x[i] == granted_at and x[i] > now - b then
      found = i
      break
    end
  end
  if not found then
    return peek(x, y, z)
  end
  x[found + 1] = x[found + 1] - math.min(units, x[found + 1])
  if x[found + 1] == 0 then
    table.remove(x, found + 1)
    table.remove(x, found)
  end
  local ok, left, retry, reset = sluice_decide(algo, x, y, z, a, b, unit, now_us, true)
  if reset == 0 then
    store(ok, left, retry, reset, false)
  else
    store(ok, left, retry, reset, sluice_format(algo, x, y, z), sluice_ttl(algo, reset))
  end
  return {ok, left, retry, reset, 0, 0, 0}
end

-- A lease. Who asked lately: this instance, and the others within one ttl.
local cost, want, ttl = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. string.format('%d', now - ttl))
redis.call('ZADD', KEYS[2], now, ARGV[7])
redis.call('PEXPIRE', KEYS[2], math.max(1, ttl))
local askers = redis.call('ZCARD', KEYS[2])

local cost_units = math.max(1, math.floor(cost / unit))
local _, seen = sluice_decide(algo, x, y, z, a, b, unit, now_us, true)
local n = cost_units
if seen > cost_units then
  local share = math.floor(seen / math.max(1, askers))
  n = math.min(math.max(want, cost_units), math.max(cost_units, share))
end
local valid = ttl
if aligned then
  valid = math.min(valid, (math.floor(now / b) + 1) * b - now)
end
-- A sliding window's lease is logged at the time it ends (src/algorithm/lease.cpp says why).
local stamp = nil
if algo == 2 then
  stamp = now + valid
end
local ok, left, retry, reset, n1, n2, n3 =
  sluice_decide(algo, x, y, z, a, b, n * unit, now_us, false, stamp)
if ok == 0 and n > cost_units then
  n = cost_units
  ok, left, retry, reset, n1, n2, n3 = sluice_decide(algo, x, y, z, a, b, n * unit, now_us, false, stamp)
end
if ok == 0 then
  return {0, left, retry, reset, 0, valid, 0}
end
redis.call('SET', KEYS[1], sluice_format(algo, n1, n2, n3), 'PX', sluice_ttl(algo, reset))
local at = now
if algo == 2 then
  at = n1[#n1 - 1]
end
return {1, left, 0, reset, n, valid, at}
