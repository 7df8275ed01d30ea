-- Sluice refund: gives back what a decision spent, for a multi-key decision whose keys live
-- on several Redis Cluster slots and that a later slot denied.
-- KEYS[1..n]     the keys (as in lua/decide.lua)
-- ARGV[4i-3..4i] algorithm, a, b of KEYS[i] (lua/prelude.lua), and what to give back, in
--                the units of its cost
-- Reply:         n, the number of keys written
-- A key never ends up with more available than if nothing had been spent, so a refund never
-- admits more than the limit: a bucket is capped at its capacity, gcra's TAT at now, a
-- window's count at zero and only in the window it was spent in. A key with nothing left
-- to remember is deleted, which decides exactly as a missing one; a missing key, or one
-- holding another algorithm's state or no Sluice state, is left alone.
local now_us = sluice_now(nil)
local now = math.floor(now_us / 1000)
local written = 0
for i = 1, #KEYS do
  local k = KEYS[i]
  local algo, a, b, back =
    tonumber(ARGV[4 * i - 3]), tonumber(ARGV[4 * i - 2]), tonumber(ARGV[4 * i - 1]), tonumber(ARGV[4 * i])
  local s = sluice_load(algo, redis.call('GET', k))
  if s then
    local keep
    if algo == 0 then
      -- Brought up to now as a decision would, then given back, capped at the capacity.
      local level, ts = math.min(a, s[1]), s[2]
      if now > ts then
        level, ts = math.min(a, level + (now - ts) * b), now
      end
      level = math.min(a, level + back)
      if level < a then
        keep = {level, ts}
      end
    elseif algo == 1 then
      local tat = math.max(s[1], now_us) - back
      if tat > now_us then
        keep = {tat}
      end
    elseif algo == 4 then
      if s[2] == now - now % b and s[1] > back then
        keep = {s[1] - back, s[2]}
      elseif s[2] ~= now - now % b then
        keep = s
      end
    elseif algo == 3 then
      if s[1] == now - now % b then
        keep = {s[1], math.max(0, s[2] - back), s[3]}
        if keep[2] == 0 and keep[3] == 0 then keep = nil end
      else
        keep = s
      end
    else
      -- The newest entries are the ones this decision wrote.
      local j = #s
      while back > 0 and j > 0 do
        local take = math.min(back, s[j])
        s[j], back = s[j] - take, back - take
        if s[j] == 0 then
          s[j], s[j - 1] = nil, nil
          j = j - 2
        end
      end
      if #s > 0 then keep = s end
    end
    if keep then
      local _, _, _, reset = sluice_decide(algo, keep, a, b, 0, now_us, true)
      if reset > 0 then
        redis.call('SET', k, sluice_format(algo, keep), 'PX', sluice_ttl(algo, reset))
      else
        redis.call('DEL', k)
      end
    else
      redis.call('DEL', k)
    end
    written = written + 1
  end
end
return written
