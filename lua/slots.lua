-- Sluice concurrency limits: n steps on keys' slots in one call, applied in order, each
-- exactly as it would be on its own; the same steps as src/algorithm/slots.cpp
-- (slots_acquire, slots_release, slots_renew). One step (n = 1) is a slot step's own call;
-- more are the steps that waited together on one connection (decision_batcher.hpp), on
-- one hash slot on Cluster, so Redis pays its per-call cost (EVALSHA, TIME) once for all.
-- KEYS[i]      step i's limit key: a sorted set of slot ids (32 hex digits) by when their
--              lease ends (ms, the server's clock); kept until the last lease ends. A key
--              may appear more than once: a later step sees what an earlier one wrote
-- ARGV[4i-3]   step i: 0 acquire, 1 release, 2 renew
-- ARGV[4i-2]   step i's slot id
-- ARGV[4i-1]   acquire: the limit (at most this many holders)
-- ARGV[4i]     acquire, renew: the lease, ms
-- ARGV[4n+1]   optional "now" in ms, for tests that replay a history; default: Redis TIME
-- Reply:       4n values, step i at 4i-3..4i: held 0|1, in flight after, retry_after_ms
--              (an acquire refused), expires_in_ms (acquired or renewed); or, for that step
--              alone, an error (a key that is no sorted set) at 4i-3 and three zeros: one
--              bad key never fails the others. One flat array (see lua/decide_batch.lua).
-- Every step first forgets the holders whose lease has ended (once per key and call: the
-- call has one "now"), so a holder that died frees its slot when its lease ends, and a
-- release or renew of an ended lease finds nothing.
local n = #KEYS
local now = math.floor(sluice_now(ARGV[4 * n + 1]) / 1000)
local swept = {}  -- key -> true (a sorted set, swept at `now`) or its error reply
local out = {}

-- Step i's reply at out[4i-3..4i].
local function put(i, held, in_flight, retry_after, expires_in)
  out[4 * i - 3], out[4 * i - 2], out[4 * i - 1], out[4 * i] = held, in_flight, retry_after,
    expires_in
end

-- Holds `id` on `key` until now + ttl, and the key until its last lease ends; `count`: the
-- holders before, when the step knows it (ZADD says whether `id` is new).
local function hold(i, key, id, ttl, count)
  local added = redis.call('ZADD', key, string.format('%d', now + ttl), id)
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  redis.call('PEXPIRE', key, string.format('%d', tonumber(last[2]) - now))
  put(i, 1, count and count + added or redis.call('ZCARD', key), 0, ttl)
end

for i = 1, n do
  local key = KEYS[i]
  local s = swept[key]
  if not s then
    -- pcall: a key of another type fails its steps, not the whole call.
    local r = redis.pcall('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', now))
    s = (type(r) == 'table' and r.err) and r or true
    swept[key] = s
  end
  local op, id = tonumber(ARGV[4 * i - 3]), ARGV[4 * i - 2]
  if s ~= true then
    put(i, s, 0, 0, 0)
  elseif op == 1 then
    local removed = redis.call('ZREM', key, id)
    put(i, removed, redis.call('ZCARD', key), 0, 0)
  else
    local ttl = tonumber(ARGV[4 * i])
    local holds = redis.call('ZSCORE', key, id)
    if op == 2 then
      if holds then
        hold(i, key, id, ttl, nil)
      else
        put(i, 0, redis.call('ZCARD', key), 0, 0)
      end
    else
      local count = redis.call('ZCARD', key)
      if holds or count < tonumber(ARGV[4 * i - 1]) then
        hold(i, key, id, ttl, count)
      else
        local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
        if #first == 0 then
          put(i, 0, 0, ttl, 0)
        else
          put(i, 0, count, tonumber(first[2]) - now, 0)
        end
      end
    end
  end
end
return out
