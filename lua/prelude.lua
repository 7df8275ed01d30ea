-- Sluice's shared Lua prelude, prepended to every script at build time
-- (cmake/embed_lua_file.cmake): each fact about the stored state is written once here.
-- A bucket is stored as the string "level_ut ts_ms": micro-tokens (1 token = 1e6 ut) left
-- at ts_ms. Every quantity stays below 2^53, so Lua's doubles are exact.

-- "now" in ms: `arg` when a test replays a history, else the Redis server's clock, so the
-- whole fleet shares one clock.
local function sluice_now(arg)
  if arg and arg ~= '' then
    return tonumber(arg)
  end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local sluice_malformed = 'sluice: malformed bucket state'

-- A stored state read: level, ts; or nil when it is not a Sluice bucket state.
local function sluice_parse(v)
  local sp = string.find(v, ' ', 1, true)
  local level = sp and tonumber(string.sub(v, 1, sp - 1))
  local ts = sp and tonumber(string.sub(v, sp + 1))
  if level and ts then
    return level, ts
  end
  return nil
end

-- A state brought up to now: capped at the capacity, refilled linearly since ts.
local function sluice_refill(level, ts, cap, rate, now)
  level = math.min(cap, level)
  if now > ts then
    return math.min(cap, level + (now - ts) * rate), now
  end
  return level, ts
end

-- A state as stored. '%d', not '%.0f' or a Lua number: integer formatting costs Redis a
-- fraction of the floating-point kind, and every quantity is a whole number.
local function sluice_format(level, ts)
  return string.format('%d %d', level, ts)
end
