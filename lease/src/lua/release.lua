-- Delete the lease only while it still holds our owner token, so a late node never deletes its
-- successor's lease. KEYS[1] lease key. ARGV[1] owner token. Returns 1 deleted, 0 not the owner.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
