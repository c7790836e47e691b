-- FLAW (acquire without NX): overwrites whoever holds the lease. Self-test builds only.
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {1, redis.call('INCR', KEYS[2])}
