#!/usr/bin/env python3
"""A second, minimal node, written from docs/node-protocol.md alone: proof that the protocol is
enough to plug another implementation into the harness. Needs redis-py (scripts/deps installs it
in target/python-node-venv). Logs go to stderr; stdout carries protocol events only.

A correct lease, as the reference node is: validity counts from the send time of the newest
confirmed acquire or renewal (less a drift margin) on the monotonic clock; a loss (reported by a
check, a failed renewal, or the validity running out) cancels the work in flight at once and for
good; every decision (a checkpoint passed, a store call sent, a model call started) reads the clock
and checks the loss under the lease's lock, and reports that reading as `decided_ns` (protocol 2).

`--bug NAME` turns it into one of the buggy implementations the checker's tests run (BUGS below):
each is one realistic mistake, the rest of the node unchanged.

`--lock NAME` takes the lock from a library instead (locks.py, docs/libraries.md): its acquire,
renewal (the node's renewal thread calling the library's extend, or the library's own hidden
renewal, declared in `hello`: protocol 3), ownership check and release, as its documentation has a
long-running job use them; the pipeline and the protocol stay this node's. A lock whose renewals
the node cannot see leaves it no local validity: it trusts the library, as the library's users do.
Every place a library forced a deviation says so ("library:")."""

import argparse
import http.client
import json
import os
import queue
import random
import socket
import sys
import threading
import time

import redis

from locks import LOCKS
NAMES = {1: "after-prepare", 2: "between-batches", 3: "before-create", 4: "after-create",
         5: "before-switch", 6: "after-switch", 7: "before-persist"}

PROTOCOL = 4  # 3: `hello` declares a library's key and hidden renewals; 4: the model service
BUGS = {
    "release-then-write": "drops the previous live collection after releasing the lease",
    "leaked-watchdog": "an aborted round leaves its renewal running and its lease unreleased",
    "validity-from-reply": "counts its validity from when a reply arrived, not when it was sent",
    "no-deadline": "has no local validity deadline: only checks and renewals end ownership",
    "wall-clock-deadline": "keeps its deadline on the wall clock (time.time()), which NTP can step",
    "undeclared-key": "keeps its lease under another key than the protocol's without declaring it (with --lock "
                      "declared)",
    "foreign-token": "names its tokens as a lock library might (lock:<nonce>:<seq>) but speaks protocol 2, "
                     "whose token rule refuses them",
}
BUG = None
LOCK = "own"  # or a library of locks.LOCKS
SPEAKS = PROTOCOL  # the version agreed in `hello`

out_lock = threading.Lock()
state = {"round": 0}


def now_ns():
    return time.monotonic_ns()


def deadline_clock_ns():
    """The clock the lease's deadline is kept on: monotonic (the bug: the wall clock). Stamps in
    events are always monotonic."""
    return time.time_ns() if BUG == "wall-clock-deadline" else time.monotonic_ns()


def emit(kind, **fields):
    with out_lock:  # stamped under the lock: events leave in the order of their stamps
        event = {"mono_ns": now_ns(), "round": state["round"], "type": kind, **fields}
        sys.stdout.write(json.dumps(event) + "\n")
        sys.stdout.flush()


class Lost(Exception):
    pass


class Lease:
    """One acquisition: renewal thread, local validity, sticky loss, checkpoints, release."""

    def __init__(self, cfg, held, fence, stall, basis, sent_ns, renewals):
        """`held`: the lock (locks.py); `basis`: the acquire's (send, reply) on the deadline clock;
        `sent_ns`: its send's monotonic stamp, the one reported; `renewals`: the lock's."""
        self.cfg, self.held, self.token, self.fence, self.stall = cfg, held, held.token, fence, stall
        self.hidden = renewals == "hidden"
        lease = cfg["lease"]
        self.ttl_ns = lease["ttl_ms"] * 1_000_000
        self.renew_ns = lease["renew_ms"] * 1_000_000
        self.margin_ns = self.ttl_ns // 100 + 2_000_000  # clock drift, as the reference lease
        # Validity counts from the send of the newest confirmed write (the bug: from its reply),
        # on the deadline clock; sent_ns is the monotonic stamp reported.
        sent_at, answered_at = basis
        self.confirmed_ns = answered_at if BUG == "validity-from-reply" else sent_at
        self.acquire_sent_ns = sent_ns
        self.lost = None  # sticky: the first reason, never cleared
        self.lost_event = threading.Event()
        self.lock = threading.RLock()
        self.stop = threading.Event()
        if not self.hidden:
            threading.Thread(target=self.renew_loop, daemon=True).start()

    def deadline_ns(self):
        # A lock that renews out of sight gives the node no validity to count: it trusts the lock.
        if BUG == "no-deadline" or self.hidden:
            return float("inf")
        return self.confirmed_ns + self.ttl_ns - self.margin_ns

    def lose(self, reason, checkpoint=None):
        # Set and announced under the lock: an event emitted under it while not lost comes first.
        with self.lock:
            if self.lost is not None:
                return
            self.lost = reason
            self.lost_event.set()
            emit("ownership_lost", token=self.token, reason=reason, checkpoint=checkpoint)

    def decide(self, checkpoint=None):
        """A decision: reads the clock, then (under the lock) the loss and the validity. Returns
        the reading; raises Lost once ownership is lost or the validity has run out. Call with
        the lock held, and emit the decision's event before releasing it."""
        decided = now_ns()
        vnow = deadline_clock_ns()
        gone = self.held.lost()  # the library's own word, where it has one
        if gone is not None:
            self.lose(gone, checkpoint)
        if self.lost is not None:
            raise Lost(self.lost)
        if vnow >= self.deadline_ns():
            self.lose("expired", checkpoint)
            raise Lost("expired")
        return decided

    def wait(self, seconds):
        """Work that a loss, or the validity running out, cancels at once."""
        end = now_ns() + int(seconds * 1e9)
        while True:
            now, vnow = now_ns(), deadline_clock_ns()
            if self.lost is not None:
                raise Lost(self.lost)
            if now >= end:
                return
            deadline = self.deadline_ns()
            if vnow >= deadline:
                with self.lock:
                    self.decide()  # raises Lost("expired"), unless a renewal just moved the deadline
                continue
            if self.hidden and self.held.lost() is not None:
                with self.lock:
                    self.decide()  # raises Lost with the library's word
            slice_ns = min(end - now, deadline - vnow, 50_000_000 if self.hidden else end - now)
            if self.lost_event.wait(slice_ns / 1e9):
                raise Lost(self.lost)

    def renew_loop(self):
        ttl = self.cfg["lease"]["ttl_ms"]
        while not self.stop.wait(min(max(0, self.confirmed_ns + self.renew_ns - deadline_clock_ns()), self.renew_ns) / 1e9):
            # A stall blocks renewal from when its command arrived until it ends, whichever lease
            # holds then; one that ended before this lease's turn is not carried over to it.
            left = self.stall.get("until_ns", 0) - now_ns()
            if left > 0:
                time.sleep(left / 1e9)
            sent = now_ns()  # read before the loss: a loss from here on is stamped later
            vsent = deadline_clock_ns()
            if self.stop.is_set() or self.lost is not None:
                return
            if vsent >= self.deadline_ns():
                self.lose("expired")
                return
            try:
                ok = self.renew_once(ttl)
            except redis.RedisError as e:
                self.lose("renewal_failed")
                print("renewal failed: %s" % type(e).__name__, file=sys.stderr)
                return
            vanswered = deadline_clock_ns()
            with self.lock:
                if self.lost is not None or self.stop.is_set():
                    return  # lost or released while in flight: the answer no longer matters
                if ok != 1:
                    self.lose("renewal_rejected")
                    return
                if vanswered >= self.deadline_ns():
                    self.lose("renewal_late")
                    return
                base = vanswered if BUG == "validity-from-reply" else vsent
                self.confirmed_ns = max(self.confirmed_ns, base)
                emit("renewed", token=self.token, sent_ns=sent)

    def renew_once(self, ttl):
        """One owner-compared renewal: 1 renewed, 0 not the owner; RedisError on no answer."""
        return 1 if self.held.renew(ttl) else 0

    def ensure_owned(self, n):
        with self.lock:
            self.decide(n)
        try:
            holder = self.holder()
        except redis.RedisError:
            self.lose("read_error", n)
            raise Lost("read_error")
        if holder == "missing":
            self.lose("key_missing", n)
        elif holder != "mine":
            self.lose("held_by_other", n)  # another's, or (a library that cannot tell) not ours
        if self.lost is not None:
            raise Lost(self.lost)

    def holder(self):
        """"mine", "missing", "another" or "not_mine" (locks.py)."""
        return self.held.owned()

    def release(self):
        self.stop.set()
        try:
            return self.held.release()
        except redis.RedisError as e:
            return "error: %s" % type(e).__name__


class Node:
    def __init__(self, cfg, commands, locks):
        self.cfg, self.commands, self.locks = cfg, commands, locks
        self.r = locks.r
        self.nonce = os.urandom(8).hex()
        self.seq = 0
        self.call = 0
        self.stopped = False
        self.stall = {}
        self.slow_model_ms = 0
        self.pending_sync = None
        self.rng = random.Random(cfg["seed"])
        self.model_addr = cfg.get("model_addr") if SPEAKS >= 4 else None
        self.cleanup_after_release = None

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
            self.stall["until_ns"] = now_ns() + cmd["ms"] * 1_000_000
            if self.locks.renewals == "hidden":
                # library: its renewal runs on its own thread; the node cannot stall it.
                print("stall_renewal: the lock renews out of this node's reach", file=sys.stderr)
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
            if BUG == "foreign-token":
                token = "lock:%s:%s" % (self.nonce, self.seq)
            self.seq += 1
            sent, vsent = now_ns(), deadline_clock_ns()
            try:
                held = self.locks.acquire(token, lease["ttl_ms"])
                if held is not None:
                    return self.holding(held, prefix, (sent, vsent))
                reason = "held by another node"
            except redis.RedisError as e:
                reason = "redis error: %s" % type(e).__name__
            if time.monotonic() >= deadline:
                emit("acquire_timed_out", reason=reason)
                return None
            self.poll(self.rng.uniform(0.005, 0.05))
        return None

    def holding(self, held, prefix, sent):
        """The Lease of a lock just acquired, with its fence: the lock's, else the counter's."""
        fence = held.fence
        if fence is None:
            # library: no fence; the counter is a second command, not atomic with the acquire (a
            # crash between them leaves a lease without a fence, released at once below).
            try:
                fence = self.r.incr(prefix + ":fence")
            except redis.RedisError:
                try:
                    held.release()
                except redis.RedisError:
                    pass
                raise
        sent_ns, vsent = sent
        return Lease(self.cfg, held, fence, self.stall, (vsent, deadline_clock_ns()), sent_ns, self.locks.renewals)

    def store(self, lease, op, fence, collection=None, points=0, tolerate=()):
        self.call += 1
        call = self.call
        body = json.dumps({"tenant": self.cfg["tenant"], "node": self.cfg["node"], "token": lease.token,
                           "fence": fence, "call": call, "collection": collection, "points": points})
        with lease.lock:  # a node that lost, or whose validity ran out, starts no store call
            decided = lease.decide()
            emit("store_call_sent", token=lease.token, fence=fence, op=op, call=call, decided_ns=decided)
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

    def model_call(self, lease, fence, batch):
        """One model call: a request to the model service (protocol 4), which a loss, or the
        validity running out, cancels at once (the connection is closed under it); else the
        model's time spent here. A `slow_model` command adds its time here."""
        p = self.cfg["pipeline"]
        if self.slow_model_ms or not self.model_addr:
            lease.wait((self.slow_model_ms + (0 if self.model_addr else p["embed_ms"])) / 1000)
        if not self.model_addr:
            return
        host, port = self.model_addr.rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=(p["embed_ms"] + p["store_timeout_ms"]) / 1000)
        body = json.dumps({"tenant": self.cfg["tenant"], "node": self.cfg["node"], "token": lease.token,
                           "fence": fence, "batch": batch, "ms": p["embed_ms"]})
        answer = {}
        done = threading.Event()

        def call():
            try:
                conn.request("POST", "/v1/embed", body, {"content-type": "application/json"})
                resp = conn.getresponse()
                answer["status"] = resp.status
                resp.read()
            except (OSError, http.client.HTTPException) as e:
                answer["error"] = type(e).__name__
            finally:
                done.set()

        threading.Thread(target=call, daemon=True).start()
        try:
            while not done.wait(0.005):
                if lease.lost is not None:
                    raise Lost(lease.lost)
                gone = lease.hidden and lease.held.lost() is not None
                if gone or deadline_clock_ns() >= lease.deadline_ns():
                    with lease.lock:
                        lease.decide()  # raises Lost, unless a renewal just moved the deadline
        except Lost:
            if conn.sock is not None:
                try:
                    conn.sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            raise
        if answer.get("status") != 200:
            raise RuntimeError("model call failed: %s" % answer.get("error", answer.get("status")))

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
                try:
                    decided = lease.decide(n)
                except Lost as lost:
                    emit("checkpoint_failed", token=lease.token, number=n, reason=str(lost))
                    raise
                emit("checkpoint_passed", token=lease.token, number=n, decided_ns=decided)
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
        lease.wait(p["prepare_ms"] / 1000)
        self.checkpoint(lease, 1)
        for batch in range(p["batches"]):
            self.hold()
            self.poll()
            with lease.lock:  # new work starts only while the lease is valid
                decided = lease.decide()
            began = time.monotonic()
            self.model_call(lease, fence, batch)
            ms = int((time.monotonic() - began) * 1000)
            with lease.lock:  # a call the loss cancelled is not reported as finished
                if lease.lost is not None:
                    raise Lost(lease.lost)
                emit("model_call", token=lease.token, batch=batch, ms=ms, decided_ns=decided)
            if batch + 1 < p["batches"]:
                self.checkpoint(lease, 2)
        self.checkpoint(lease, 3)
        host, port = self.cfg["store_addr"].rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=p["store_timeout_ms"] / 1000)
        conn.request("GET", "/v1/tenants/" + tenant)
        view = json.loads(conn.getresponse().read())
        # Every collection but the alias's target: an aborted round's temporary, or a live one
        # replaced by a round that stopped before its own drop.
        for c in view["collections"]:
            if c["name"] != view.get("alias"):
                self.store(lease, "drop_collection", fence, c["name"], tolerate=(404, 409))
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
        old = view["alias"] if view["alias"] and view["alias"] != name else None
        if old and BUG != "release-then-write":
            self.store(lease, "drop_collection", fence, old, tolerate=(404, 409))
        self.cleanup_after_release = old if BUG == "release-then-write" else None
        return name

    def run(self):
        while not self.stopped:
            state["round"] += 1
            emit("acquire_attempt")
            lease = self.acquire()
            if lease is None:
                continue
            emit("acquired", token=lease.token, fence=lease.fence, sent_ns=lease.acquire_sent_ns)
            self.cleanup_after_release = None
            try:
                name = self.round(lease)
                emit("sync_finished", token=lease.token, fence=lease.fence, collection=name)
            except Lost as lost:
                emit("round_aborted", token=lease.token, lost=True, reason=str(lost))
            except (RuntimeError, OSError, ValueError, redis.RedisError) as e:
                emit("round_aborted", token=lease.token, lost=False, reason=str(e))
                if BUG == "leaked-watchdog":
                    continue  # the bug: the abort path forgets the lease (and its renewal thread)
            emit("released", token=lease.token, outcome=lease.release())
            if self.cleanup_after_release:
                self.drop_after_release(lease, self.cleanup_after_release)
            self.poll(self.cfg["pipeline"]["pause_ms"] / 1000)

    def drop_after_release(self, lease, collection):
        """The release-then-write bug: cleanup that runs after the lease was released, as if the
        node still held it (it writes without deciding: the decision is the missing check)."""
        self.call += 1
        emit("store_call_sent", token=lease.token, fence=lease.fence, op="drop_collection", call=self.call,
             decided_ns=now_ns())
        body = json.dumps({"tenant": self.cfg["tenant"], "node": self.cfg["node"], "token": lease.token,
                           "fence": lease.fence, "call": self.call, "collection": collection, "points": 0})
        host, port = self.cfg["store_addr"].rsplit(":", 1)
        try:
            conn = http.client.HTTPConnection(host, int(port), timeout=self.cfg["pipeline"]["store_timeout_ms"] / 1000)
            conn.request("POST", "/v1/drop", body, {"content-type": "application/json"})
            resp = conn.getresponse()
            status = resp.status
            resp.read()
        except (OSError, http.client.HTTPException) as e:
            emit("store_call_unknown", token=lease.token, call=self.call, detail=type(e).__name__)
            return
        if status == 200:
            emit("store_call_acked", token=lease.token, call=self.call)
        else:
            emit("store_call_rejected", token=lease.token, call=self.call, reason=str(status))


def main():
    global BUG, LOCK, SPEAKS
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bug", choices=sorted(BUGS), help="run one of the buggy implementations")
    parser.add_argument("--lock", choices=sorted(LOCKS), default="own",
                        help="the lease's own Lua scripts, or a lock library's lock (locks.py)")
    args = parser.parse_args()
    BUG, LOCK = args.bug, args.lock
    first = sys.stdin.readline()
    if not first:
        return 2
    cfg = json.loads(first)
    # The harness offers a range of versions: `protocol` (oldest) to `protocol_max` (newest).
    offered = range(cfg.get("protocol", 0), cfg.get("protocol_max", cfg.get("protocol", 0)) + 1)
    if cfg.get("type") != "config" or 2 not in offered and PROTOCOL not in offered:
        emit("error", message="expected a config line offering protocol 2 or %d" % PROTOCOL)
        return 2
    lease = cfg["lease"]
    r = redis.Redis.from_url(cfg["redis_url"], socket_timeout=lease["command_timeout_ms"] / 1000,
                             socket_connect_timeout=1)
    locks = LOCKS[LOCK](r, cfg)
    name = "python-node 0.3 (%s)" % locks.implementation if LOCK == "own" else \
        "python-node 0.3 on %s" % locks.implementation
    if BUG:
        name += " (bug: %s)" % BUG
    # The newest version both speak; a lock with declarations to make needs 3.
    if BUG == "foreign-token":
        SPEAKS = 2
    else:
        SPEAKS = max(v for v in (2, 3, PROTOCOL) if v in offered)
    hello = {"protocol": SPEAKS, "implementation": name}
    if locks.key != "leasequake:{%s}:lease" % cfg["tenant"] and BUG != "undeclared-key":
        hello["lease_key"] = locks.key
    if locks.renewals == "hidden":
        hello["renewals"] = "hidden"
    if hello["protocol"] < 3 and len(hello) > 2:
        emit("error", message="--lock %s declares its key or renewals: it needs protocol 3" % LOCK)
        return 2
    emit("hello", **hello)
    commands = queue.Queue(maxsize=256)

    def read_stdin():
        for line in sys.stdin:
            try:
                commands.put(json.loads(line))
            except ValueError:
                emit("error", message="unreadable command")
        commands.put({"type": "eof"})  # the parent is gone

    threading.Thread(target=read_stdin, daemon=True).start()
    node = Node(cfg, commands, locks)
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
