-- Sluice refund: gives back what a decision spent, for a multi-key decision whose keys live
-- on several Redis Cluster slots and that a later slot denied.
-- KEYS[1..n]     the keys (as in lua/decide.lua)
-- ARGV[4i-3..4i] algorithm, a, b of KEYS[i] (lua/prelude.lua), and what to give back, in
--                the units of its cost
-- Reply:         n, the number of keys written
-- The refund of key_operation::refund (sluice_adjust): a key never ends up with more
-- available than if nothing had been spent, so a refund never admits more than the limit.
-- A key with nothing left to remember is deleted, which decides exactly as a missing one; a
-- missing key, a blocked one, or one holding another algorithm's state or no Sluice state
-- is left alone.
local now = sluice_now(nil)
local written = 0
for i = 1, #KEYS do
  local k = KEYS[i]
  local algo, a, b, back =
    tonumber(ARGV[4 * i - 3]), tonumber(ARGV[4 * i - 2]), tonumber(ARGV[4 * i - 1]), tonumber(ARGV[4 * i])
  local x, y, z = sluice_load(algo, redis.call('GET', k))
  if x and x ~= 'b' then
    local _, _, _, _, str, px = sluice_apply(3, algo, x, y, z, a, b, back, now)
    if str then
      redis.call('SET', k, str, 'PX', px)
    else
      redis.call('DEL', k)
    end
    written = written + 1
  end
end
return written
