-- FLAW (renew without owner compare): extends the key whoever holds it. Self-test builds only.
return redis.call('PEXPIRE', KEYS[1], ARGV[2])
