-- Extend the lease only while it still holds our owner token.
-- KEYS[1] lease key. ARGV[1] owner token, ARGV[2] ttl in ms. Returns 1 extended, 0 not the owner.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
