"""The locks the Python node can hold its lease with (`--lock NAME`): its own Lua scripts, or a lock
library used as its documentation has a long-running job use it (docs/libraries.md). Each is a
factory with the same surface:

- `key`: the Redis key the lock keeps its token under (declared in `hello` when not the
  protocol's); `renewals`: "reported" (the node's renewal thread calls `renew`) or "hidden" (the
  library renews on a thread of its own, out of the node's sight);
- `acquire(token, ttl_ms)`: a `Held` or None when another holds the lock (RedisError when Redis
  does not answer). `Held.token` is the value in the key (the library's, where it picks its own);
  `Held.fence` the lock's fence, or None (the node then INCRs the fence counter itself);
- `Held.renew(ttl_ms)` -> True/False (False: not the owner); `Held.owned()` -> "mine", "missing",
  "another", or "not_mine" (a library that cannot tell a missing key from another's);
  `Held.lost()` -> the library's own word that the lock is gone, or None; `Held.release()` ->
  "deleted", "not_owner" or "error: ...".

Every place a library forced a deviation from the node protocol says so ("library:")."""

import asyncio
import concurrent.futures
import importlib.metadata
import math
import os
import sys
import threading

import redis

ACQUIRE = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {1, redis.call('INCR', KEYS[2])}
end
return {0, redis.call('PTTL', KEYS[1])}
"""
RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"""
RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


class NoAnswer(redis.RedisError):
    """A library call that Redis did not answer in time (for libraries not built on redis-py)."""


def version(dist):
    """An installed distribution's version (the pinned one, in the node's venv)."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def prefix(cfg):
    return "leasequake:{%s}" % cfg["tenant"]


class Own:
    """The lease's own Lua scripts: SET NX PX and INCR in one script, owner-compared PEXPIRE and DEL."""
    renewals = "reported"

    def __init__(self, r, cfg):
        self.r, self.key, self.fence_key = r, prefix(cfg) + ":lease", prefix(cfg) + ":fence"
        self.implementation = "redis-py %s" % redis.__version__

    def acquire(self, token, ttl_ms):
        won, value = self.r.eval(ACQUIRE, 2, self.key, self.fence_key, token, ttl_ms)
        return OwnHeld(self, token, value) if won == 1 else None


class OwnHeld:
    def __init__(self, own, token, fence):
        self.own, self.token, self.fence = own, token, fence

    def renew(self, ttl_ms):
        return self.own.r.eval(RENEW, 1, self.own.key, self.token, ttl_ms) == 1

    def owned(self):
        held = self.own.r.get(self.own.key)
        return "missing" if held is None else ("mine" if held.decode() == self.token else "another")

    def lost(self):
        return None

    def release(self):
        return "deleted" if self.own.r.eval(RELEASE, 1, self.own.key, self.token) == 1 else "not_owner"


class Declared(Own):
    """The lease's own scripts as a library would keep them, for the harness's tests of protocol 3
    (no library to install): the key "lock:" + name, a token of the lock's own (16 hex digits, no
    node name), and a renewal thread of its own that the node does not see (`renewals: hidden`)."""
    renewals = "hidden"

    def __init__(self, r, cfg):
        super().__init__(r, cfg)
        self.key = "lock:" + prefix(cfg)
        self.ttl_ms = cfg["lease"]["ttl_ms"]
        self.implementation = "the node's own scripts under a library's key and tokens (redis-py %s)" % redis.__version__

    def acquire(self, token, ttl_ms):
        token = os.urandom(8).hex()
        won, value = self.r.eval(ACQUIRE, 2, self.key, self.fence_key, token, ttl_ms)
        return DeclaredHeld(self, token, value) if won == 1 else None


class DeclaredHeld(OwnHeld):
    def __init__(self, own, token, fence):
        super().__init__(own, token, fence)
        self.gone, self.stop = None, threading.Event()
        threading.Thread(target=self.renew_hidden, daemon=True).start()

    def renew_hidden(self):
        while not self.stop.wait(self.own.ttl_ms / 3000):
            try:
                if not self.renew(self.own.ttl_ms):
                    self.gone = "renewal_rejected"
                    return
            except redis.RedisError:
                self.gone = "renewal_failed"
                return

    def lost(self):
        return self.gone

    def release(self):
        self.stop.set()
        return super().release()


class RedisPy:
    """redis-py's redis.lock.Lock: acquire(token=...), extend(replace_ttl=True) from the node's
    renewal thread (the library has no renewal of its own), owned(), release()."""
    renewals = "reported"

    def __init__(self, r, cfg):
        self.r, self.key = r, prefix(cfg) + ":lease"
        self.implementation = "redis-py %s redis.lock.Lock" % redis.__version__

    def acquire(self, token, ttl_ms):
        # library: the lock's token lives in a thread-local by default, and the renewal runs on
        # another thread, which would see no token: thread_local=False, as its docs advise then.
        lock = self.r.lock(self.key, timeout=ttl_ms / 1000, blocking=False, thread_local=False)
        return RedisPyHeld(lock, token) if lock.acquire(blocking=False, token=token) else None


class RedisPyHeld:
    fence = None  # library: no fence

    def __init__(self, lock, token):
        self.lock, self.token = lock, token

    def renew(self, ttl_ms):
        try:
            # library: extend() adds to the remaining ttl unless replace_ttl; it takes seconds.
            return bool(self.lock.extend(ttl_ms / 1000, replace_ttl=True))
        except redis.exceptions.LockNotOwnedError:
            return False

    def owned(self):
        # library: owned() says only yes or no: a missing key cannot be told from another's.
        return "mine" if self.lock.owned() else "not_mine"

    def lost(self):
        return None

    def release(self):
        try:
            self.lock.release()
            return "deleted"
        except redis.exceptions.LockNotOwnedError:
            return "not_owner"


class PythonRedisLock:
    """python-redis-lock's redis_lock.Lock with auto_renewal=True: the library's own thread
    extends the key every two thirds of `expire`, out of the node's sight."""
    renewals = "hidden"

    def __init__(self, r, cfg):
        import redis_lock
        self.lib, self.r, self.name = redis_lock, r, prefix(cfg)
        self.key = "lock:" + self.name  # library: its keys are "lock:" + name
        self.implementation = "python-redis-lock %s (redis-py %s)" % (version("python-redis-lock"), redis.__version__)

    def acquire(self, token, ttl_ms):
        # library: `expire` is whole seconds (SET EX): the ttl rounds up to the next second.
        expire = max(1, math.ceil(ttl_ms / 1000))
        # library: a str id is the token as given (the protocol's token).
        lock = self.lib.Lock(self.r, self.name, expire=expire, id=token, auto_renewal=True)
        return PythonRedisLockHeld(self.lib, lock) if lock.acquire(blocking=False) else None


class PythonRedisLockHeld:
    fence = None  # library: no fence

    def __init__(self, lib, lock):
        self.lib, self.lock, self.token = lib, lock, lock.id

    def owned(self):
        # library: locked() is true whoever holds the key; get_owner_id() is the owner-compared read.
        held = self.lock.get_owner_id()
        return "missing" if held is None else ("mine" if held == self.lock.id else "another")

    def lost(self):
        # library: a failed extension ends the renewal thread with an exception and tells the
        # holder nothing: there is no loss to see here.
        return None

    def release(self):
        try:
            self.lock.release()
            return "deleted"
        except self.lib.NotAcquired:
            return "not_owner"


class Pottery:
    """pottery's Redlock on one master (the harness runs one primary; Redlock's quorum of one):
    acquire(blocking=False), extend() from the node's renewal thread, locked(), release()."""
    renewals = "reported"

    def __init__(self, r, cfg):
        import pottery
        self.lib, self.r, self.name = pottery, r, prefix(cfg)
        self.key = "redlock:" + self.name  # library: its keys are "redlock:" + key
        self.implementation = "pottery %s Redlock, one master (redis-py %s)" % (version("pottery"), redis.__version__)

    def acquire(self, token, ttl_ms):
        # library: num_extensions defaults to 3, which ends a job longer than four ttls: a long
        # job raises it (its docs: "the number of times that this Redlock's lease can be extended").
        # raise_on_redis_errors: a Redis that does not answer is an error, not "not held".
        lock = self.lib.Redlock(key=self.name, masters={self.r}, auto_release_time=ttl_ms / 1000,
                                num_extensions=sys.maxsize, raise_on_redis_errors=True)
        try:
            won = lock.acquire(blocking=False)
        except self.lib.QuorumIsImpossible as e:
            raise NoAnswer(str(e))
        return PotteryHeld(self.lib, lock) if won else None


class PotteryHeld:
    fence = None  # library: no fence

    def __init__(self, lib, lock):
        # library: the token it wrote is private (a uuid4 per acquire); read only to report it.
        self.lib, self.lock, self.token = lib, lock, lock._uuid

    def renew(self, ttl_ms):
        try:
            self.lock.extend()
            return True
        except self.lib.QuorumIsImpossible as e:
            raise NoAnswer(str(e))
        except self.lib.ExtendUnlockedLock:
            return False

    def owned(self):
        # library: locked() is the remaining validity, 0 when not ours: missing or another's alike.
        try:
            return "mine" if self.lock.locked() > 0 else "not_mine"
        except self.lib.QuorumIsImpossible as e:
            raise NoAnswer(str(e))

    def lost(self):
        return None

    def release(self):
        try:
            self.lock.release()
            return "deleted"
        except self.lib.ReleaseUnlockedLock:
            return "not_owner"
        except self.lib.QuorumIsImpossible as e:
            return "error: %s" % type(e).__name__


class AioRedLock:
    """aioredlock's Aioredlock with lock_timeout=None: the library's watchdog task extends the
    lock every 0.6 of `internal_lock_timeout`, out of the node's sight. Run on an event loop of its
    own thread (the node is threaded)."""
    renewals = "hidden"

    def __init__(self, r, cfg):
        import aioredlock
        self.lib, self.r, self.key = aioredlock, r, prefix(cfg) + ":lease"  # library: the resource is the key
        self.timeout = cfg["lease"]["command_timeout_ms"] / 1000
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        ttl = cfg["lease"]["ttl_ms"] / 1000
        # library: retry_count 1, so the node's own acquire loop (bounded by acquire_wait_ms)
        # does the retrying.
        self.manager = aioredlock.Aioredlock([cfg["redis_url"]], retry_count=1, internal_lock_timeout=ttl)
        self.implementation = "aioredlock %s (aioredis %s)" % (version("aioredlock"), version("aioredis"))

    def run(self, coro, calls=1):
        """Runs a library call on the loop; a call Redis does not answer within `calls` command
        timeouts is NoAnswer (library: aioredis 1.x has no command timeout of its own)."""
        async def bounded():
            return await asyncio.wait_for(coro, self.timeout * calls)
        try:
            return asyncio.run_coroutine_threadsafe(bounded(), self.loop).result()
        except (asyncio.TimeoutError, concurrent.futures.TimeoutError, OSError) as e:
            raise NoAnswer(type(e).__name__)

    def acquire(self, token, ttl_ms):
        try:
            # library: lock_identifier is the token written (the protocol's token).
            lock = self.run(self.manager.lock(self.key, lock_identifier=token), calls=3)
        except self.lib.LockError:
            return None
        return AioRedLockHeld(self, lock)


class AioRedLockHeld:
    fence = None  # library: no fence

    def __init__(self, lib, lock):
        self.lib, self.lock, self.token = lib, lock, lock.id

    def owned(self):
        # library: is_locked() says whether anyone holds the resource; get_lock() reads the key's
        # ttl only if this identifier holds it (LockError otherwise: missing or another's alike).
        try:
            self.lib.run(self.lib.manager.get_lock(self.lock.resource, self.lock.id))
            return "mine"
        except self.lib.lib.LockError:
            return "not_mine"

    def lost(self):
        # library: lock.valid turns false when its watchdog's extension failed.
        return None if self.lock.valid else "renewal_failed"

    def release(self):
        try:
            self.lib.run(self.lib.manager.unlock(self.lock), calls=3)
            return "deleted"
        except self.lib.lib.LockError:
            return "not_owner"
        except NoAnswer as e:
            return "error: %s" % e


LOCKS = {"own": Own, "declared": Declared, "redis-py": RedisPy, "python-redis-lock": PythonRedisLock, "pottery": Pottery,
         "aioredlock": AioRedLock}
