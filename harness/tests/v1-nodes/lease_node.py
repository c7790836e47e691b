#!/usr/bin/env python3
"""The simplest node a user writes from docs/node-protocol.md: protocol version 1, no stamps
(events carry only mono_ns), a renewal thread, a local deadline, the seven checkpoints, and the
model service for its model calls when the config names one. Needs redis-py (scripts/deps puts it
in target/python-node-venv).

It reports as little as version 1 asks, so its verdicts rest on what the harness sees on its links
(the wire properties), not on its word. `--bug NAME` plants one realistic mistake:

  validity-from-reply  counts its validity from when the acquire's or renewal's reply arrived
  wall-clock-deadline  keeps its deadline on the wall clock (time.time()), which NTP can step
  leaked-renewal       a round aborted by a failed store call leaves its renewal thread running
                       and its lease held, and the next round begins
  model-after-loss     its embedding loop does not look at the lease: it keeps calling the model
                       after a loss (a checkpoint still stops it)
"""

import argparse
import http.client
import json
import os
import queue
import sys
import threading
import time

import redis

ACQUIRE = ("if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then "
           "return {1, redis.call('INCR', KEYS[2])} end return {0, redis.call('PTTL', KEYS[1])}")
RENEW = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0"
RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"
PATHS = {"begin_epoch": "epoch", "create_collection": "create", "upsert": "upsert", "switch_alias": "alias",
         "persist_record": "record", "drop_collection": "drop"}
BUGS = ("validity-from-reply", "wall-clock-deadline", "leaked-renewal", "model-after-loss")
BUG = None
out = threading.Lock()
ROUND = [0]


def emit(kind, **fields):
    with out:
        sys.stdout.write(json.dumps({"mono_ns": time.monotonic_ns(), "round": ROUND[0], "type": kind, **fields}) + "\n")
        sys.stdout.flush()


def deadline_clock():
    return time.time() if BUG == "wall-clock-deadline" else time.monotonic()


class Lost(Exception):
    pass


class Lease:
    def __init__(self, node, token, fence, basis):
        self.node, self.token, self.fence = node, token, fence
        self.ttl = node.cfg["lease"]["ttl_ms"] / 1000
        self.valid_from = basis
        self.lost = None
        self.lock = threading.Lock()
        self.stop = threading.Event()
        threading.Thread(target=self.renewals, daemon=True).start()

    def lose(self, reason):
        with self.lock:
            if self.lost is None:
                self.lost = reason
                emit("ownership_lost", token=self.token, reason=reason, checkpoint=None)

    def check(self):
        """Raises Lost once lost or past the deadline (the ttl less a hundredth, from the send)."""
        if self.lost is None and deadline_clock() >= self.valid_from + self.ttl * 0.99:
            self.lose("expired")
        if self.lost is not None:
            raise Lost(self.lost)

    def renewals(self):
        every = self.node.cfg["lease"]["renew_ms"] / 1000
        while not self.stop.wait(every):
            stall = self.node.stall_until - time.monotonic()
            if stall > 0:
                time.sleep(stall)
            if self.stop.is_set() or self.lost is not None:
                return
            sent = deadline_clock()
            try:
                ok = self.node.r.eval(RENEW, 1, self.node.key, self.token, self.node.cfg["lease"]["ttl_ms"])
            except redis.RedisError:
                self.lose("renewal_failed")
                return
            if ok != 1:
                self.lose("renewal_rejected")
                return
            self.valid_from = deadline_clock() if BUG == "validity-from-reply" else sent
            emit("renewed", token=self.token)


class Node:
    def __init__(self, cfg, commands):
        self.cfg, self.commands = cfg, commands
        self.r = redis.Redis.from_url(cfg["redis_url"], socket_timeout=cfg["lease"]["command_timeout_ms"] / 1000)
        self.key = "leasequake:{%s}:lease" % cfg["tenant"]
        self.nonce, self.seq, self.call = os.urandom(6).hex(), 0, 0
        self.stopped, self.stall_until, self.slow_ms, self.pending = False, 0, 0, None

    def poll(self, wait=0.0):
        try:
            cmd = self.commands.get(timeout=wait) if wait else self.commands.get_nowait()
        except queue.Empty:
            return None
        kind = cmd.get("type")
        if kind in ("stop", "eof"):
            self.stopped = True
        elif kind == "stall_renewal":
            self.stall_until = time.monotonic() + cmd["ms"] / 1000
        elif kind == "slow_model":
            self.slow_ms = cmd["ms"]
        elif kind == "go":
            return cmd["checkpoint"]
        return None

    def hold(self):
        """At a pending sync point: say so and wait for its go."""
        if self.pending is None:
            return
        n, token = self.pending
        self.pending = None
        emit("sync_point", token=token, number=n)
        while not self.stopped and self.poll(0.05) != n:
            pass
        if self.stopped:
            raise RuntimeError("stopped")

    def acquire(self):
        lease = self.cfg["lease"]
        end = time.monotonic() + lease["acquire_wait_ms"] / 1000
        while not self.stopped:
            token = "%s/%s/%s/%s" % (self.cfg["node"], self.cfg["incarnation"], self.seq, self.nonce)
            self.seq += 1
            sent = deadline_clock()
            try:
                won, fence = self.r.eval(ACQUIRE, 2, self.key, self.key[:-5] + "fence", token, lease["ttl_ms"])
                if won == 1:
                    return Lease(self, token, fence, deadline_clock() if BUG == "validity-from-reply" else sent)
            except redis.RedisError:
                pass
            if time.monotonic() >= end:
                emit("acquire_timed_out", reason="held by another node")
                return None
            self.poll(0.02)
        return None

    def checkpoint(self, lease, n):
        p = self.cfg["pipeline"]
        self.hold()
        self.poll()
        if self.stopped:
            raise RuntimeError("stopped")
        if n in p["checkpoints"]:
            lease.check()
            try:
                holder = self.r.get(self.key)
            except redis.RedisError:
                lease.lose("read_error")
                raise Lost("read_error")
            if holder is None or holder.decode() != lease.token:
                lease.lose("key_missing" if holder is None else "held_by_other")
            lease.check()
            emit("checkpoint_passed", token=lease.token, number=n)
        if n in p["sync_points"]:
            self.pending = (n, lease.token)

    def http(self, addr, method, path, body=None, extra_s=0.0):
        host, port = addr.rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=self.cfg["pipeline"]["store_timeout_ms"] / 1000 + extra_s)
        conn.request(method, path, body, {"content-type": "application/json"})
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read() or b"{}")

    def store(self, lease, op, fence, collection=None, points=0, tolerate=()):
        lease.check()
        self.call += 1
        emit("store_call_sent", token=lease.token, fence=fence, op=op, call=self.call)
        self.hold()
        body = json.dumps({"tenant": self.cfg["tenant"], "node": self.cfg["node"], "token": lease.token,
                           "fence": fence, "call": self.call, "collection": collection, "points": points})
        try:
            status, answer = self.http(self.cfg["store_addr"], "POST", "/v1/" + PATHS[op], body)
        except (OSError, http.client.HTTPException, ValueError) as e:
            emit("store_call_unknown", token=lease.token, call=self.call, detail=type(e).__name__)
            raise RuntimeError("store call outcome unknown")
        if status == 200:
            emit("store_call_acked", token=lease.token, call=self.call)
            return answer
        emit("store_call_rejected", token=lease.token, call=self.call, reason=answer.get("error", str(status)))
        if status not in tolerate:
            raise RuntimeError("store rejected " + op)
        return answer

    def model(self, lease, fence, batch):
        p = self.cfg["pipeline"]
        if BUG != "model-after-loss":
            lease.check()
        began = time.monotonic()
        time.sleep(self.slow_ms / 1000)
        if self.cfg.get("model_addr"):
            body = json.dumps({"tenant": self.cfg["tenant"], "node": self.cfg["node"], "token": lease.token,
                               "fence": fence, "batch": batch, "ms": p["embed_ms"]})
            status, _ = self.http(self.cfg["model_addr"], "POST", "/v1/embed", body, p["embed_ms"] / 1000)
            if status != 200:
                raise RuntimeError("the model answered %d" % status)
        else:
            time.sleep(p["embed_ms"] / 1000)
        if BUG != "model-after-loss":
            lease.check()
        emit("model_call", token=lease.token, batch=batch, ms=int((time.monotonic() - began) * 1000))

    def round(self, lease):
        p, tenant, fence = self.cfg["pipeline"], self.cfg["tenant"], lease.fence
        if self.cfg["fence_source"] == "store":
            fence = self.store(lease, "begin_epoch", 0)["fence"]
        time.sleep(p["prepare_ms"] / 1000)
        self.checkpoint(lease, 1)
        for batch in range(p["batches"]):
            self.hold()
            self.model(lease, fence, batch)
            if batch + 1 < p["batches"]:
                self.checkpoint(lease, 2)
        self.checkpoint(lease, 3)
        _, view = self.http(self.cfg["store_addr"], "GET", "/v1/tenants/" + tenant)
        for c in view["collections"]:  # every collection but the alias's target
            if c["name"] != view.get("alias"):
                self.store(lease, "drop_collection", fence, c["name"], tolerate=(404, 409))
        name = "%s-f%s-%s-i%s-r%s" % (tenant, fence, self.cfg["node"], self.cfg["incarnation"], ROUND[0])
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
            ROUND[0] += 1
            emit("acquire_attempt")
            lease = self.acquire()
            if lease is None:
                continue
            emit("acquired", token=lease.token, fence=lease.fence)
            self.pending = None
            try:
                emit("sync_finished", token=lease.token, fence=lease.fence, collection=self.round(lease))
            except Lost as e:
                emit("round_aborted", token=lease.token, lost=True, reason=str(e))
            except (RuntimeError, OSError, ValueError, KeyError, redis.RedisError) as e:
                emit("round_aborted", token=lease.token, lost=False, reason=str(e))
                if BUG == "leaked-renewal":
                    continue  # the bug: this path forgets the lease and its renewal thread
            lease.stop.set()
            try:
                done = self.r.eval(RELEASE, 1, self.key, lease.token)
                outcome = "deleted" if done == 1 else "not_owner"
            except redis.RedisError as e:
                outcome = "error: " + type(e).__name__
            emit("released", token=lease.token, outcome=outcome)
            self.poll(self.cfg["pipeline"]["pause_ms"] / 1000)


def main():
    global BUG
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bug", choices=BUGS)
    BUG = parser.parse_args().bug
    cfg = json.loads(sys.stdin.readline() or "{}")
    if cfg.get("type") != "config" or cfg.get("protocol") != 1:
        emit("error", message="expected a config line offering protocol 1")
        return 2
    emit("hello", protocol=1, implementation="v1-lease-node 0.1" + (" (bug: %s)" % BUG if BUG else ""))
    commands = queue.Queue(maxsize=256)

    def read():
        for line in sys.stdin:
            commands.put(json.loads(line))
        commands.put({"type": "eof"})

    threading.Thread(target=read, daemon=True).start()
    node = Node(cfg, commands)
    while True:
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
