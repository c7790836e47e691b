#!/usr/bin/env python3
"""A second, minimal node, written from docs/node-protocol.md alone: proof that the protocol is
enough to plug another implementation into the harness. Needs redis-py (scripts/deps installs it
in target/python-node-venv). Logs go to stderr; stdout carries protocol events only."""

import http.client
import json
import os
import queue
import random
import sys
import threading
import time

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
NAMES = {1: "after-prepare", 2: "between-batches", 3: "before-create", 4: "after-create",
         5: "before-switch", 6: "after-switch", 7: "before-persist"}

out_lock = threading.Lock()
state = {"round": 0}


def emit(kind, **fields):
    event = {"mono_ns": time.monotonic_ns(), "round": state["round"], "type": kind, **fields}
    with out_lock:
        sys.stdout.write(json.dumps(event) + "\n")
        sys.stdout.flush()


class Lost(Exception):
    pass


class Lease:
    """One acquisition: renewal thread, sticky loss, checkpoints, release."""

    def __init__(self, r, cfg, token, fence, stall):
        self.r, self.cfg, self.token, self.fence, self.stall = r, cfg, token, fence, stall
        prefix = "leasequake:{%s}" % cfg["tenant"]
        self.key = prefix + ":lease"
        self.lost = None  # sticky: the first reason, never cleared
        self.lock = threading.Lock()
        self.stop = threading.Event()
        threading.Thread(target=self.renew_loop, daemon=True).start()

    def lose(self, reason, checkpoint=None):
        # Set and announced under the lock: an event emitted under it while not lost comes first.
        with self.lock:
            if self.lost is not None:
                return
            self.lost = reason
            emit("ownership_lost", token=self.token, reason=reason, checkpoint=checkpoint)

    def renew_loop(self):
        ttl, every = self.cfg["lease"]["ttl_ms"], self.cfg["lease"]["renew_ms"] / 1000
        while not self.stop.wait(every):
            stall = self.stall.get("ms", 0)
            if stall:
                self.stall["ms"] = 0
                time.sleep(stall / 1000)
            if self.stop.is_set() or self.lost is not None:
                return
            try:
                ok = self.r.eval(RENEW, 1, self.key, self.token, ttl)
            except redis.RedisError as e:
                self.lose("renewal_failed")
                print("renewal failed: %s" % type(e).__name__, file=sys.stderr)
                return
            if ok != 1:
                self.lose("renewal_rejected")
                return
            emit("renewed", token=self.token)

    def ensure_owned(self, n):
        if self.lost is not None:  # first line: sticky
            raise Lost(self.lost)
        try:
            holder = self.r.get(self.key)
        except redis.RedisError:
            self.lose("read_error", n)
            raise Lost("read_error")
        if holder is None:
            self.lose("key_missing", n)
        elif holder.decode() != self.token:
            self.lose("held_by_other", n)
        if self.lost is not None:
            raise Lost(self.lost)

    def release(self):
        self.stop.set()
        try:
            deleted = self.r.eval(RELEASE, 1, self.key, self.token)
            return "deleted" if deleted == 1 else "not_owner"
        except redis.RedisError as e:
            return "error: %s" % type(e).__name__


class Node:
    def __init__(self, cfg, commands):
        self.cfg, self.commands = cfg, commands
        lease = cfg["lease"]
        self.r = redis.Redis.from_url(cfg["redis_url"], socket_timeout=lease["command_timeout_ms"] / 1000,
                                      socket_connect_timeout=1)
        self.nonce = os.urandom(8).hex()
        self.seq = 0
        self.call = 0
        self.stopped = False
        self.stall = {}
        self.slow_model_ms = 0
        self.pending_sync = None
        self.rng = random.Random(cfg["seed"])

    def poll(self, block_s=0.0):
        """Handles commands; returns the checkpoint of a `go`, if one came."""
        try:
            cmd = self.commands.get(timeout=block_s) if block_s else self.commands.get_nowait()
        except queue.Empty:
            return None
        kind = cmd.get("type")
        if kind == "stop" or kind == "eof":
            self.stopped = True
        elif kind == "stall_renewal":
            self.stall["ms"] = cmd["ms"]
        elif kind == "slow_model":
            self.slow_model_ms = cmd["ms"]
        elif kind == "go":
            return cmd["checkpoint"]
        return None

    def acquire(self):
        lease, prefix = self.cfg["lease"], "leasequake:{%s}" % self.cfg["tenant"]
        deadline = time.monotonic() + lease["acquire_wait_ms"] / 1000
        while not self.stopped:
            token = "%s/%s/%s/%s" % (self.cfg["node"], self.cfg["incarnation"], self.seq, self.nonce)
            self.seq += 1
            try:
                won, value = self.r.eval(ACQUIRE, 2, prefix + ":lease", prefix + ":fence", token, lease["ttl_ms"])
                if won == 1:
                    return Lease(self.r, self.cfg, token, value, self.stall)
                reason = "held by another node for %s ms" % value
            except redis.RedisError as e:
                reason = "redis error: %s" % type(e).__name__
            if time.monotonic() >= deadline:
                emit("acquire_timed_out", reason=reason)
                return None
            self.poll(self.rng.uniform(0.005, 0.05))
        return None

    def store(self, lease, op, fence, collection=None, points=0, tolerate=()):
        self.call += 1
        call = self.call
        body = json.dumps({"tenant": self.cfg["tenant"], "node": self.cfg["node"], "token": lease.token,
                           "fence": fence, "call": call, "collection": collection, "points": points})
        with lease.lock:  # a node that knows it lost starts no store call
            if lease.lost is not None:
                raise Lost(lease.lost)
            emit("store_call_sent", token=lease.token, fence=fence, op=op, call=call)
        self.hold()
        host, port = self.cfg["store_addr"].rsplit(":", 1)
        path = {"begin_epoch": "epoch", "create_collection": "create", "upsert": "upsert",
                "switch_alias": "alias", "persist_record": "record", "drop_collection": "drop"}[op]
        try:
            conn = http.client.HTTPConnection(host, int(port), timeout=self.cfg["pipeline"]["store_timeout_ms"] / 1000)
            conn.request("POST", "/v1/" + path, body, {"content-type": "application/json"})
            resp = conn.getresponse()
            status, answer = resp.status, json.loads(resp.read() or b"{}")
        except (OSError, http.client.HTTPException, ValueError) as e:
            emit("store_call_unknown", token=lease.token, call=call, detail=type(e).__name__)
            raise RuntimeError("store call outcome unknown")
        if status == 200:
            emit("store_call_acked", token=lease.token, call=call)
            return answer
        emit("store_call_rejected", token=lease.token, call=call, reason=answer.get("error", str(status)))
        if status in tolerate:
            return answer
        raise RuntimeError("store rejected %s" % op)

    def checkpoint(self, lease, n):
        p = self.cfg["pipeline"]
        self.hold()
        if n in p["checkpoints"]:
            try:
                lease.ensure_owned(n)
            except Lost as lost:
                emit("checkpoint_failed", token=lease.token, number=n, reason=str(lost))
                raise
            with lease.lock:  # a loss right after the check makes it a failed check
                if lease.lost is not None:
                    emit("checkpoint_failed", token=lease.token, number=n, reason=lease.lost)
                    raise Lost(lease.lost)
                emit("checkpoint_passed", token=lease.token, number=n)
        if n in p["sync_points"]:
            self.pending_sync = (n, lease.token)

    def hold(self):
        """Holds at a pending sync point before the step after its checkpoint (after
        store_call_sent when that step is a store call) until its `go`."""
        if self.pending_sync is None:
            return
        n, token = self.pending_sync
        self.pending_sync = None
        emit("sync_point", token=token, number=n)
        while not self.stopped and self.poll(0.05) != n:
            pass
        if self.stopped:
            raise RuntimeError("stopped")

    def round(self, lease):
        p, tenant = self.cfg["pipeline"], self.cfg["tenant"]
        fence = lease.fence
        if self.cfg["fence_source"] == "store":
            fence = self.store(lease, "begin_epoch", 0)["fence"]
        self.pending_sync = None
        time.sleep(p["prepare_ms"] / 1000)
        self.checkpoint(lease, 1)
        for batch in range(p["batches"]):
            self.hold()
            began = time.monotonic()
            self.poll()
            time.sleep((p["embed_ms"] + self.slow_model_ms) / 1000)
            emit("model_call", token=lease.token, batch=batch, ms=int((time.monotonic() - began) * 1000))
            if batch + 1 < p["batches"]:
                self.checkpoint(lease, 2)
        self.checkpoint(lease, 3)
        host, port = self.cfg["store_addr"].rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=p["store_timeout_ms"] / 1000)
        conn.request("GET", "/v1/tenants/" + tenant)
        view = json.loads(conn.getresponse().read())
        for c in view["collections"]:
            if not c["live"]:
                self.store(lease, "drop_collection", fence, c["name"], tolerate=(404,))
        name = "%s-f%s-%s-i%s-r%s" % (tenant, fence, self.cfg["node"], self.cfg["incarnation"], state["round"])
        self.store(lease, "create_collection", fence, name)
        self.checkpoint(lease, 4)
        for _ in range(p["batches"]):
            self.store(lease, "upsert", fence, name, p["batch_size"])
        self.checkpoint(lease, 5)
        self.store(lease, "switch_alias", fence, name)
        self.checkpoint(lease, 6)
        self.checkpoint(lease, 7)
        self.store(lease, "persist_record", fence, name)
        if view["alias"] and view["alias"] != name:
            self.store(lease, "drop_collection", fence, view["alias"], tolerate=(404, 409))
        return name

    def run(self):
        while not self.stopped:
            state["round"] += 1
            emit("acquire_attempt")
            lease = self.acquire()
            if lease is None:
                continue
            emit("acquired", token=lease.token, fence=lease.fence)
            try:
                name = self.round(lease)
                emit("sync_finished", token=lease.token, fence=lease.fence, collection=name)
            except Lost as lost:
                emit("round_aborted", token=lease.token, lost=True, reason=str(lost))
            except (RuntimeError, OSError, ValueError, redis.RedisError) as e:
                emit("round_aborted", token=lease.token, lost=False, reason=str(e))
            emit("released", token=lease.token, outcome=lease.release())
            self.poll(self.cfg["pipeline"]["pause_ms"] / 1000)


def main():
    first = sys.stdin.readline()
    if not first:
        return 2
    cfg = json.loads(first)
    if cfg.get("type") != "config" or cfg.get("protocol") != 1:
        emit("error", message="expected a protocol 1 config line")
        return 2
    emit("hello", protocol=1, implementation="python-node 0.1 (redis-py %s)" % redis.__version__)
    commands = queue.Queue(maxsize=256)

    def read_stdin():
        for line in sys.stdin:
            try:
                commands.put(json.loads(line))
            except ValueError:
                emit("error", message="unreadable command")
        commands.put({"type": "eof"})  # the parent is gone

    threading.Thread(target=read_stdin, daemon=True).start()
    node = Node(cfg, commands)
    while True:  # wait for start or stop
        cmd = commands.get()
        if cmd.get("type") == "start":
            node.run()
            break
        if cmd.get("type") in ("stop", "eof"):
            break
    emit("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
