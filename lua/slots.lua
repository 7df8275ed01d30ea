-- Sluice concurrency limits: one step on one key's slots, the same steps as
-- src/algorithm/slots.cpp (slots_acquire, slots_release, slots_renew).
-- KEYS[1]  the limit's key: a sorted set of slot ids (32 hex digits) by when their lease
--          ends (ms, the server's clock); kept until the last lease ends
-- ARGV[1]  the step: 0 acquire, 1 release, 2 renew
-- ARGV[2]  the slot id
-- ARGV[3]  acquire: the limit (at most this many holders)
-- ARGV[4]  acquire, renew: the lease, ms
-- ARGV[5]  optional "now" in ms, for tests that replay a history; default: Redis TIME
-- Reply:   {held 0|1, in flight after, retry_after_ms (an acquire refused), expires_in_ms
--          (acquired or renewed)}
-- Every step first forgets the holders whose lease has ended, so a holder that died frees
-- its slot when its lease ends, and a release or renew of an ended lease finds nothing.
local op, id = tonumber(ARGV[1]), ARGV[2]
local now = math.floor(sluice_now(ARGV[5]) / 1000)
local key = KEYS[1]
redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', now))

-- Holds `id` until now + ttl, and the key until its last lease ends.
local function hold(ttl)
  redis.call('ZADD', key, string.format('%d', now + ttl), id)
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  redis.call('PEXPIRE', key, string.format('%d', tonumber(last[2]) - now))
  return {1, redis.call('ZCARD', key), 0, ttl}
end

if op == 1 then
  local removed = redis.call('ZREM', key, id)
  return {removed, redis.call('ZCARD', key), 0, 0}
end
local ttl = tonumber(ARGV[4])
local holds = redis.call('ZSCORE', key, id)
if op == 2 then
  if not holds then
    return {0, redis.call('ZCARD', key), 0, 0}
  end
  return hold(ttl)
end
local n = redis.call('ZCARD', key)
if holds or n < tonumber(ARGV[3]) then
  return hold(ttl)
end
local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
if #first == 0 then
  return {0, 0, ttl, 0}
end
return {0, n, tonumber(first[2]) - now, 0}
