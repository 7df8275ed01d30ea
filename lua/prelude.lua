-- Sluice's shared Lua prelude, prepended to every script at build time
-- (cmake/embed_lua_file.cmake): each algorithm's math and stored format are written once
-- here, and mirror src/algorithm/*.cpp line for line, so Redis and the memory backend give
-- the same decision for the same history. Every quantity stays below 2^53, so Lua's doubles
-- are exact, and floor/ceil of a quotient of two such integers is the integer one.
--
-- Algorithms (the numbers of sluice::algorithm) and their parameters a, b, cost:
--   0 token_bucket            capacity, rate and cost in micro-tokens (1 token = 1e6 ut),
--                             rate per ms; state "level_ut ts_ms"
--   1 gcra                    T (us per token), B = capacity x T, cost x T; state "tat_us"
--                             (one integer, which Redis keeps inside the key's object)
--   2 sliding_window          limit, window_ms, cost; state "w" then "ts_ms n" pairs,
--                             oldest first
--   3 sliding_window_counter  limit, window_ms, cost; state "c<start_ms> <cur> <prev>"
--   4 fixed_window            limit, window_ms, cost; state "f<count> <start_ms>"
-- A key holding another algorithm's state decides as a key without state (as the memory
-- backend does); a value that is no Sluice state at all is an error.
-- Every function below is a closure made anew on each script call, so the algorithms are
-- branches of a few functions rather than a function each; and a state travels as up to
-- three numbers x, y, z (a table only for sliding_window's log), never as a table, since a
-- table per decision costs the batch script a third of its time:
--   x == false   no state;  x == nil   no Sluice state (from sluice_load only)
--   x == 'b'     a block (key_operation::block) until y (us), whatever the algorithm

-- "now" in microseconds: `arg` (in ms) when a test replays a history, else the Redis
-- server's clock, so the whole fleet shares one clock.
local function sluice_now(arg)
  if arg and arg ~= '' then
    return tonumber(arg) * 1000
  end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local sluice_malformed = 'sluice: malformed bucket state'

-- A stored value read for algorithm `algo`: its state x, y, z; false when there is none
-- for it (missing, or another algorithm's); nil when it is no Sluice state. Anchored
-- patterns and plain finds: a generic split costs the one-key script a tenth of its time.
local function sluice_load(algo, v)
  if not v then
    return false
  end
  local c = string.byte(v, 1)
  local kind, sp
  if c == 98 then
    -- 'b': a block until then (us), whatever the algorithm.
    local u = tonumber(string.sub(v, 2))
    if u then
      return 'b', u
    end
    return nil
  elseif c == 119 then
    kind = 2  -- 'w'
  elseif c == 99 then
    kind = 3  -- 'c'
  elseif c == 102 then
    kind = 4  -- 'f'
  elseif c == 45 or (c and c >= 48 and c <= 57) then
    sp = string.find(v, ' ', 1, true)
    kind = sp and 0 or 1
  else
    return nil
  end
  if kind ~= algo then
    return false
  end
  local x, y, z
  if kind == 0 then
    x, y = tonumber(string.sub(v, 1, sp - 1)), tonumber(string.sub(v, sp + 1))
    if x and y then
      return x, y
    end
  elseif kind == 1 then
    x = tonumber(v)
    if x then
      return x
    end
  elseif kind == 4 then
    x, y = string.match(v, '^f(%d+) (%-?%d+)$')
    if x then
      return tonumber(x), tonumber(y)
    end
  elseif kind == 3 then
    x, y, z = string.match(v, '^c(%-?%d+) (%d+) (%d+)$')
    if x then
      return tonumber(x), tonumber(y), tonumber(z)
    end
  else
    local log = {}
    for n in string.gmatch(v, '%-?%d+') do
      log[#log + 1] = tonumber(n)
    end
    if #log > 0 and #log % 2 == 0 and string.find(v, '^w%-?%d+ %d+[ %d%-]*$') then
      return log
    end
  end
  return nil
end

-- A state as stored. '%d', not '%.0f' or a Lua number: integer formatting costs Redis a
-- fraction of the floating-point kind, and every quantity is a whole number.
local function sluice_format(algo, x, y, z)
  if algo == 0 then
    return string.format('%d %d', x, y)
  elseif algo == 1 then
    return string.format('%d', x)
  elseif algo == 3 then
    return string.format('c%d %d %d', x, y, z)
  elseif algo == 4 then
    return string.format('f%d %d', x, y)
  end
  local parts = {}
  for i = 1, #x do
    parts[i] = string.format('%d', x[i])
  end
  return 'w' .. table.concat(parts, ' ')
end

-- A state brought up to now, every algorithm's first step: token_bucket level, ts (refilled,
-- capped at the capacity); gcra TAT; fixed_window start, count; sliding_window_counter
-- start, cur, prev; sliding_window the live log (a new table) and its total. A stored window
-- later than now's (the clock went back) stays the current one. No block here.
local function sluice_current(algo, x, y, z, a, b, now_us)
  local now = math.floor(now_us / 1000)
  if algo == 0 then
    if not x then
      return a, now
    end
    local level = math.min(a, x)
    if now > y then
      return math.min(a, level + (now - y) * b), now
    end
    return level, y
  elseif algo == 1 then
    if x and x > now_us then
      return x
    end
    return now_us
  elseif algo == 4 then
    local start = now - now % b
    if x and y >= start then
      return y, x
    end
    return start, 0
  elseif algo == 3 then
    local start = now - now % b
    if x then
      if x >= start then
        return x, y, z
      elseif x == start - b then
        return start, 0, y
      end
    end
    return start, 0, 0
  end
  local live, total = {}, 0
  if x then
    for i = 1, #x, 2 do
      if x[i] > now - b then
        live[#live + 1], live[#live + 2] = x[i], x[i + 1]
        total = total + x[i + 1]
      end
    end
  end
  return live, total
end

-- One decision on state x, y, z at now_us. Returns allowed (0|1), remaining whole units,
-- retry_after_ms, reset_after_ms, and, when allowed, the state to store (its x, y, z; kept
-- for reset_after_ms, sluice_ttl says how long). With `peek`, remaining and reset_after_ms
-- describe the state as it is and nothing is to be stored. With `stamp` (ms, sliding_window
-- only), what is admitted is logged at that time rather than now (a lease: lua/lease.lua).
local function sluice_decide(algo, x, y, z, a, b, cost, now_us, peek, stamp)
  if x == 'b' then
    if now_us < y then
      local left = math.ceil((y - now_us) / 1000)
      return 0, 0, left, left
    end
    x = false  -- the block is over: a new key
  end
  local now = math.floor(now_us / 1000)
  if algo == 0 then
    -- token_bucket (src/algorithm/token_bucket.cpp).
    local level, ts = sluice_current(0, x, y, z, a, b, now_us)
    local ok = level >= cost
    local left = level
    if ok and not peek then
      left = level - cost
    end
    local retry = 0
    if not ok then
      retry = math.ceil((cost - level) / b)
    end
    -- A penalized bucket can be below zero: nothing remains.
    local remaining, reset = math.max(0, math.floor(left / 1000000)), math.ceil((a - left) / b)
    if ok and not peek then
      return 1, remaining, 0, reset, left, ts
    end
    return ok and 1 or 0, remaining, retry, reset
  elseif algo == 1 then
    -- gcra (src/algorithm/gcra.cpp): TAT moves by cost; allowed while TAT - B <= now.
    local tat = sluice_current(1, x, y, z, a, b, now_us)
    local nxt = tat + cost
    local ok = nxt - b <= now_us
    if ok and not peek then
      return 1, math.max(0, math.floor((now_us + b - nxt) / a)), 0,
        math.ceil((nxt - now_us) / 1000), nxt
    end
    local retry = 0
    if not ok then
      retry = math.ceil((nxt - b - now_us) / 1000)
    end
    return ok and 1 or 0, math.max(0, math.floor((now_us + b - tat) / a)), retry,
      math.ceil((tat - now_us) / 1000)
  elseif algo == 4 then
    -- fixed_window (src/algorithm/fixed_window.cpp): a count per epoch-aligned window.
    local start, count = sluice_current(4, x, y, z, a, b, now_us)
    local left_ms = start + b - now
    if count + cost <= a then
      if peek then
        return 1, math.max(0, a - count), 0, count > 0 and left_ms or 0
      end
      return 1, a - count - cost, 0, left_ms, count + cost, start
    end
    return 0, math.max(0, a - count), left_ms, count > 0 and left_ms or 0
  elseif algo == 3 then
    -- sliding_window_counter (src/algorithm/sliding_window_counter.cpp).
    local start, cur, prev = sluice_current(3, x, y, z, a, b, now_us)
    local e = math.max(0, now - start)
    local ok = prev * (b - e) + (cur + cost) * b <= a * b
    local retry = 0
    if not ok then
      if cur + cost <= a then
        retry = start + b - math.floor((a - cur - cost) * b / prev) - now
      else
        retry = start + 2 * b - math.floor((a - cost) * b / cur) - now
      end
    end
    if ok and not peek then
      cur = cur + cost
    end
    local reset = 0
    if cur > 0 then
      reset = start + 2 * b - now
    elseif prev > 0 then
      reset = start + b - now
    end
    local remaining = math.max(0, a - cur - math.ceil(prev * (b - e) / b))
    if ok and not peek then
      return 1, remaining, 0, reset, start, cur, prev
    end
    return ok and 1 or 0, remaining, retry, reset
  end
  -- sliding_window (src/algorithm/sliding_window.cpp): pairs ts, n after now - window.
  local live, total = sluice_current(2, x, y, z, a, b, now_us)
  if total + cost <= a then
    if peek then
      return 1, math.max(0, a - total), 0, #live > 0 and live[#live - 1] + b - now or 0
    end
    local ts = stamp or now
    if #live > 0 and live[#live - 1] > ts then
      ts = live[#live - 1]
    end
    if #live > 0 and live[#live - 1] == ts then
      live[#live] = live[#live] + cost
    else
      live[#live + 1], live[#live + 2] = ts, cost
    end
    return 1, a - total - cost, 0, ts + b - now, live
  end
  local need, freed, retry = total + cost - a, 0, 0
  for i = 1, #live, 2 do
    freed = freed + live[i + 1]
    if freed >= need then
      retry = live[i] + b - now
      break
    end
  end
  return 0, math.max(0, a - total), retry, live[#live - 1] + b - now
end

-- Refund (give back) or penalize (spend whatever is left) `c` on state x, y, z (no block):
-- the state after (src/algorithm/*_adjust). Penalties are bounded: a bucket owes at most
-- one burst, a count reaches at most twice the limit.
local function sluice_adjust(refund, algo, x, y, z, a, b, c, now_us)
  x, y, z = sluice_current(algo, x, y, z, a, b, now_us)
  if algo == 0 then
    return refund and math.min(a, x + c) or math.max(-a, x - c), y
  elseif algo == 1 then
    return refund and math.max(now_us, x - c) or math.min(x + c, now_us + 2 * b)
  elseif algo == 4 then
    return refund and math.max(0, y - c) or math.min(2 * a, y + c), x
  elseif algo == 3 then
    return x, refund and math.max(0, y - c) or math.min(2 * a, y + c), z
  end
  local live, total = x, y
  if refund then
    -- The newest entries are the ones the spending wrote.
    while c > 0 and #live > 0 do
      local take = math.min(c, live[#live])
      live[#live], c = live[#live] - take, c - take
      if live[#live] == 0 then
        live[#live], live[#live - 1] = nil, nil
      end
    end
    return live
  end
  local add = math.min(c, 2 * a - total)
  if add > 0 then
    local ts = math.floor(now_us / 1000)
    if #live > 0 and live[#live - 1] > ts then
      ts = live[#live - 1]
    end
    if #live > 0 and live[#live - 1] == ts then
      live[#live] = live[#live] + add
    else
      live[#live + 1], live[#live + 2] = ts, add
    end
  end
  return live
end

-- How long to keep a state whose reset_after is `reset` ms. gcra's reset is rounded up
-- from microseconds: one more ms so that the key never expires before its TAT.
local function sluice_ttl(algo, reset)
  if algo == 1 then
    return string.format('%d', reset + 1)
  end
  return string.format('%d', reset)
end

-- One unit of what the algorithm counts (a token, a request) in its parameters' units
-- (src/algorithm/algorithms.hpp, unit_of).
local function sluice_unit(algo, a)
  if algo == 0 then
    return 1000000
  elseif algo == 1 then
    return a
  end
  return 1
end

-- Any step on one key: op 0 a check, 1 a peek, 2 reset, 3 refund, 4 penalize, 5 block
-- (src/algorithm/limit.cpp, limit_apply), on state x, y, z. Returns allowed, remaining,
-- retry_after_ms, reset_after_ms, then what to write: a state string and its PX, false to
-- delete the key, or nothing. The batch script calls sluice_decide itself for a check
-- (op 0): one call less per decision is a tenth of its Lua time.
local function sluice_apply(op, algo, x, y, z, a, b, cost, now_us)
  if op == 0 then
    local ok, left, retry, reset, n1, n2, n3 = sluice_decide(algo, x, y, z, a, b, cost, now_us)
    if n1 then
      return ok, left, retry, reset, sluice_format(algo, n1, n2, n3), sluice_ttl(algo, reset)
    end
    return ok, left, retry, reset
  elseif op == 1 then
    local ok, left, retry, reset = sluice_decide(algo, x, y, z, a, b, cost, now_us, true)
    return ok, left, retry, reset
  elseif op == 5 then
    return 0, 0, cost, cost, string.format('b%d', now_us + cost * 1000), string.format('%d', cost)
  end
  if op == 2 then
    x = false  -- reset: forget the state, and any block
  else
    if x == 'b' then
      if now_us < y then
        -- A block is not something to refund or add to: it stays as it is.
        local left = math.ceil((y - now_us) / 1000)
        return 0, 0, left, left
      end
      x = false
    end
    x, y, z = sluice_adjust(op == 3, algo, x, y, z, a, b, cost, now_us)
  end
  -- What a check of one unit sees now; a state that no longer matters is not kept.
  local ok, left, retry, reset =
    sluice_decide(algo, x, y, z, a, b, sluice_unit(algo, a), now_us, true)
  if reset == 0 then
    return ok, left, retry, reset, false
  end
  return ok, left, retry, reset, sluice_format(algo, x, y, z), sluice_ttl(algo, reset)
end
