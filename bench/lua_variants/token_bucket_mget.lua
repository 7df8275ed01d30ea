-- A measured variant, not used by Sluice: lua/token_bucket_batch.lua with one MGET for all N
-- keys instead of one GET per key. Cheaper for Redis, but MGET answers nil for a key of another
-- type, which this script would then overwrite with a bucket: the shipped script reads each key
-- with redis.pcall('GET') so a wrong-type key fails its own decision and is left alone. Same
-- units as lua/token_bucket.lua; a key that appears twice sees its first write.
-- KEYS[1..n]  buckets      ARGV[3i-2], ARGV[3i-1], ARGV[3i]  capacity, rate, cost of KEYS[i]
-- Reply:      4n integers: allowed, remaining, retry_after_ms, reset_after_ms per key
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local vals = redis.call('MGET', unpack(KEYS))
local written = {}
local out = {}
for i = 1, #KEYS do
  local key = KEYS[i]
  local cap = tonumber(ARGV[3 * i - 2])
  local rate = tonumber(ARGV[3 * i - 1])
  local cost = tonumber(ARGV[3 * i])
  local level, ts = cap, now
  local v = written[key] or vals[i]
  if v then
    local sp = string.find(v, ' ', 1, true)
    if not sp then
      return redis.error_reply('sluice: malformed bucket state')
    end
    level = math.min(cap, tonumber(string.sub(v, 1, sp - 1)))
    ts = tonumber(string.sub(v, sp + 1))
    if now > ts then
      level = math.min(cap, level + (now - ts) * rate)
      ts = now
    end
  end
  local j = 4 * i - 3
  if level >= cost then
    level = level - cost
    local reset = math.ceil((cap - level) / rate)
    local s = string.format('%.0f %.0f', level, ts)
    redis.call('SET', key, s, 'PX', reset)
    written[key] = s
    out[j], out[j + 1], out[j + 2], out[j + 3] = 1, math.floor(level / 1000000), 0, reset
  else
    out[j], out[j + 1], out[j + 2], out[j + 3] = 0, math.floor(level / 1000000),
      math.ceil((cost - level) / rate), math.ceil((cap - level) / rate)
  end
end
return out
