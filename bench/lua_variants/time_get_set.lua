-- TIME, GET and SET PX with a constant value: lua/token_bucket.lua's three commands without
-- its arithmetic and formatting.
local t = redis.call('TIME')
local v = redis.call('GET', KEYS[1])
redis.call('SET', KEYS[1], '99000000 1764683123456', 'PX', 1000)
return {1, 99, 0, 10}
