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
-- branches of a few functions rather than a function each.

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

-- A stored value read for algorithm `algo`: its numbers (a table), false when there is no
-- state for it (missing, or another algorithm's), or nil when it is no Sluice state.
local function sluice_load(algo, v)
  if not v then
    return false
  end
  local c = string.byte(v, 1)
  local kind, sp
  if c == 119 then
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
  -- Anchored patterns and plain finds: a generic split costs the one-key script a tenth
  -- of its time.
  local x, y, z
  if kind == 0 then
    x, y = tonumber(string.sub(v, 1, sp - 1)), tonumber(string.sub(v, sp + 1))
    if x and y then
      return {x, y}
    end
  elseif kind == 1 then
    x = tonumber(v)
    if x then
      return {x}
    end
  elseif kind == 4 then
    x, y = string.match(v, '^f(%d+) (%-?%d+)$')
    if x then
      return {tonumber(x), tonumber(y)}
    end
  elseif kind == 3 then
    x, y, z = string.match(v, '^c(%-?%d+) (%d+) (%d+)$')
    if x then
      return {tonumber(x), tonumber(y), tonumber(z)}
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
local function sluice_format(algo, s)
  if algo == 0 then
    return string.format('%d %d', s[1], s[2])
  elseif algo == 1 then
    return string.format('%d', s[1])
  elseif algo == 3 then
    return string.format('c%d %d %d', s[1], s[2], s[3])
  elseif algo == 4 then
    return string.format('f%d %d', s[1], s[2])
  end
  local parts = {}
  for i = 1, #s do
    parts[i] = string.format('%d', s[i])
  end
  return 'w' .. table.concat(parts, ' ')
end

-- One decision on state `s` (a table, or false for none) at now_us. Returns allowed (0|1),
-- remaining whole units, retry_after_ms, reset_after_ms, and, when allowed, the state to
-- store (kept for reset_after_ms; sluice_ttl says how long). With `peek`, remaining and
-- reset_after_ms describe the state as it is and nothing is to be stored.
local function sluice_decide(algo, s, a, b, cost, now_us, peek)
  if algo == 0 then
    -- token_bucket (src/algorithm/token_bucket.cpp): refill linearly, capped at capacity.
    local now = math.floor(now_us / 1000)
    local level, ts = a, now
    if s then
      level, ts = math.min(a, s[1]), s[2]
      if now > ts then
        level, ts = math.min(a, level + (now - ts) * b), now
      end
    end
    local ok = level >= cost
    local left = level
    if ok and not peek then
      left = level - cost
    end
    local retry = 0
    if not ok then
      retry = math.ceil((cost - level) / b)
    end
    return ok and 1 or 0, math.floor(left / 1000000), retry, math.ceil((a - left) / b),
      ok and not peek and {left, ts} or nil
  elseif algo == 1 then
    -- gcra (src/algorithm/gcra.cpp): TAT moves by cost; allowed while TAT - B <= now.
    local tat = now_us
    if s and s[1] > now_us then
      tat = s[1]
    end
    local nxt = tat + cost
    local ok = nxt - b <= now_us
    local at = tat
    if ok and not peek then
      at = nxt
    end
    local retry = 0
    if not ok then
      retry = math.ceil((nxt - b - now_us) / 1000)
    end
    return ok and 1 or 0, math.max(0, math.floor((now_us + b - at) / a)), retry,
      math.ceil((at - now_us) / 1000), ok and not peek and {nxt} or nil
  end
  local now = math.floor(now_us / 1000)
  if algo == 4 then
    -- fixed_window (src/algorithm/fixed_window.cpp): a count per epoch-aligned window.
    local start, count = now - now % b, 0
    if s and s[2] >= start then
      start, count = s[2], s[1]
    end
    local left_ms = start + b - now
    if count + cost <= a then
      if peek then
        return 1, math.max(0, a - count), 0, count > 0 and left_ms or 0
      end
      return 1, a - count - cost, 0, left_ms, {count + cost, start}
    end
    return 0, math.max(0, a - count), left_ms, count > 0 and left_ms or 0
  elseif algo == 3 then
    -- sliding_window_counter (src/algorithm/sliding_window_counter.cpp).
    local start, cur, prev = now - now % b, 0, 0
    if s then
      if s[1] >= start then
        start, cur, prev = s[1], s[2], s[3]
      elseif s[1] == start - b then
        prev = s[2]
      end
    end
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
    return ok and 1 or 0, math.max(0, a - cur - math.ceil(prev * (b - e) / b)), retry, reset,
      ok and not peek and {start, cur, prev} or nil
  end
  -- sliding_window (src/algorithm/sliding_window.cpp): pairs ts, n after now - window.
  local log = s or {}
  local first = 1
  while first <= #log and log[first] <= now - b do
    first = first + 2
  end
  local total = 0
  for i = first + 1, #log, 2 do
    total = total + log[i]
  end
  if total + cost <= a then
    if peek then
      return 1, math.max(0, a - total), 0, first <= #log and log[#log - 1] + b - now or 0
    end
    local nxt = {}
    for i = first, #log do
      nxt[#nxt + 1] = log[i]
    end
    local ts = now
    if #nxt > 0 and nxt[#nxt - 1] > ts then
      ts = nxt[#nxt - 1]
    end
    if #nxt > 0 and nxt[#nxt - 1] == ts then
      nxt[#nxt] = nxt[#nxt] + cost
    else
      nxt[#nxt + 1], nxt[#nxt + 2] = ts, cost
    end
    return 1, a - total - cost, 0, ts + b - now, nxt
  end
  local need, freed, retry = total + cost - a, 0, 0
  for i = first, #log, 2 do
    freed = freed + log[i + 1]
    if freed >= need then
      retry = log[i] + b - now
      break
    end
  end
  return 0, math.max(0, a - total), retry, log[#log - 1] + b - now
end

-- How long to keep a state whose reset_after is `reset` ms. gcra's reset is rounded up
-- from microseconds: one more ms so that the key never expires before its TAT.
local function sluice_ttl(algo, reset)
  if algo == 1 then
    return string.format('%d', reset + 1)
  end
  return string.format('%d', reset)
end
