-- Sluice: one atomic decision (read, decide, write) on one key, for any algorithm.
-- KEYS[1]  the key (a missing key, or one holding another algorithm's state, has no state)
-- ARGV[1]  the algorithm's number, ARGV[2..4] its a, b and cost (lua/prelude.lua says what
--          they are per algorithm)
-- ARGV[5]  optional "now" in ms, for tests that replay a history; default: Redis TIME
-- Reply:   {allowed 0|1, remaining whole units, retry_after_ms, reset_after_ms}, or the
--          error 'sluice: malformed bucket state' when the key holds no Sluice state
-- A denial writes nothing: it spends nothing, and every state decides the same later.
local algo = tonumber(ARGV[1])
local now = sluice_now(ARGV[5])
local s = sluice_load(algo, redis.call('GET', KEYS[1]))
if s == nil then
  return redis.error_reply(sluice_malformed)
end
local ok, left, retry, reset, nxt =
  sluice_decide(algo, s, tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), now)
if nxt then
  redis.call('SET', KEYS[1], sluice_format(algo, nxt), 'PX', sluice_ttl(algo, reset))
end
return {ok, left, retry, reset}
