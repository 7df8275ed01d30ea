-- Floor of Redis memory per tracked key, for any layout with one key and one TTL per client:
-- the key, its keyspace and expires entries, and a value that takes no memory of its own
-- (Redis shares the integer objects below 10000). No token-bucket state fits in less.
-- KEYS[1] the key; ARGV ignored (taken so the loader passes the same arguments). Reply: 1.
redis.call('SET', KEYS[1], 1, 'PX', 900000000)
return 1
