-- Sluice token bucket refund: gives back tokens a decision spent, for a multi-key decision
-- whose keys live on several Redis Cluster slots and that a later slot denied.
-- KEYS[1..n]   the buckets (as in lua/token_bucket.lua)
-- ARGV[3i-2]   capacity of KEYS[i] in micro-tokens
-- ARGV[3i-1]   refill rate of KEYS[i] in micro-tokens per millisecond, >= 1
-- ARGV[3i]     micro-tokens to give back to KEYS[i]
-- Reply:       n, the number of buckets written
-- Each bucket is refilled to now (Redis TIME) and gets the tokens back, capped at the
-- capacity: a bucket can never hold more than if nothing had been spent, so a refund never
-- admits more than the limit. A missing key is full already and stays missing; a bucket
-- that is full again is deleted, which decides exactly as a missing one; a key that holds
-- no bucket state is left alone.
local now = sluice_now(nil)
local written = 0
for i = 1, #KEYS do
  local k = KEYS[i]
  local cap, rate, back = tonumber(ARGV[3 * i - 2]), tonumber(ARGV[3 * i - 1]), tonumber(ARGV[3 * i])
  local v = redis.call('GET', k)
  local level, ts
  if v then
    level, ts = sluice_parse(v)
  end
  if level then
    level, ts = sluice_refill(level, ts, cap, rate, now)
    level = math.min(cap, level + back)
    if level >= cap then
      redis.call('DEL', k)
    else
      redis.call('SET', k, sluice_format(level, ts), 'PX',
                 string.format('%d', math.ceil((cap - level) / rate)))
    end
    written = written + 1
  end
end
return written
