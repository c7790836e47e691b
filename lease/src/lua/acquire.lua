-- Acquire the lease and, only if that succeeded, issue the next fence.
-- KEYS[1] lease key, KEYS[2] fence counter. ARGV[1] owner token, ARGV[2] ttl in ms.
-- Returns {1, fence} when acquired, {0, pttl of the holder} when not.
-- Both keys carry the same hash tag, so this stays one atomic step on a cluster too.
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {1, redis.call('INCR', KEYS[2])}
end
return {0, redis.call('PTTL', KEYS[1])}
