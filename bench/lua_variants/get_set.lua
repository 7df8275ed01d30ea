-- GET and SET PX of one key with a constant value: the two data commands of a decision,
-- without TIME and without the token-bucket arithmetic.
local v = redis.call('GET', KEYS[1])
redis.call('SET', KEYS[1], '99000000 1764683123456', 'PX', 1000)
return {1, 99, 0, 10}
