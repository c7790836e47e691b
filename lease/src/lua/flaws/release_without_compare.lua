-- FLAW (release without owner compare): deletes the key whoever holds it. Self-test builds only.
return redis.call('DEL', KEYS[1])
