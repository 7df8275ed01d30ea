-- Sluice: one atomic step (read, decide, write) on one key, for any algorithm: a check,
-- or a key operation (peek, reset, refund, penalize, block).
-- KEYS[1]  the key (a missing key, or one holding another algorithm's state, has no state)
-- ARGV[1]  the algorithm's number + 8 x the step's (0 check, 1 peek, 2 reset, 3 refund,
--          4 penalize, 5 block), ARGV[2..4] the algorithm's a and b and the cost (or the
--          amount; block: its ms) (lua/prelude.lua says what they are per algorithm)
-- ARGV[5]  optional "now" in ms, for tests that replay a history; default: Redis TIME
-- Reply:   {allowed 0|1, remaining whole units, retry_after_ms, reset_after_ms}, or the
--          error 'sluice: malformed bucket state' when the key holds no Sluice state
-- A denial writes nothing: it spends nothing, and every state decides the same later.
local code = tonumber(ARGV[1])
local algo, op = code % 8, math.floor(code / 8)
local now = sluice_now(ARGV[5])
local v = redis.call('GET', KEYS[1])
local x, y, z = sluice_load(algo, v)
if x == nil then
  return redis.error_reply(sluice_malformed)
end
local ok, left, retry, reset, str, px =
  sluice_apply(op, algo, x, y, z, tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), now)
if str then
  redis.call('SET', KEYS[1], str, 'PX', px)
elseif str == false and v then
  redis.call('DEL', KEYS[1])
end
return {ok, left, retry, reset}
