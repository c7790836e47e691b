//! Redis as the world's nodes meet it: two servers (the primary and its replica, named as the
//! container lane names them), the one clients are routed to, and the asynchronous replication
//! stream between them. Each write on the master leaves its effects (`SET ... PXAT`, `INCR`,
//! `DEL`, `PEXPIREAT`), which reach the replica a lag later, in order, unless the stream is cut or
//! a promotion starts a new one: then what was still on its way is lost, as Redis loses the
//! unreplicated tail in a failover. A promoted replica expires keys by its own clock; the old
//! primary, once back, stays a master beside the new one (split brain) until it is demoted and
//! resynchronised from the new master.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use super::env::VClock;
use super::redis::{Instance, Reply, Role};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One Redis server.
pub struct Server {
    /// `redis-primary` or `redis-replica` (its container's role name, whatever its role now).
    pub name: &'static str,
    /// Its data, role and scripts.
    pub instance: Mutex<Instance>,
    /// Restarting until: connections refused.
    pub down_until: Mutex<Option<Instant>>,
    /// Frozen (SIGSTOP) until: requests wait, nothing is served.
    pub frozen_until: Mutex<Option<Instant>>,
    /// `CLIENT PAUSE WRITE` until.
    pub writes_paused_until: Mutex<Option<Instant>>,
    /// Its wall clock: the virtual one plus this, ms.
    pub offset_ms: Mutex<i64>,
}

impl Server {
    fn new(name: &'static str, role: Role) -> Self {
        Self {
            name,
            instance: Mutex::new(Instance::new(role)),
            down_until: Mutex::default(),
            frozen_until: Mutex::default(),
            writes_paused_until: Mutex::default(),
            offset_ms: Mutex::new(0),
        }
    }

    /// An instant of `m` still ahead.
    pub fn until(m: &Mutex<Option<Instant>>) -> Option<Instant> {
        lock(m).filter(|u| Instant::now() < *u)
    }

    /// Its wall clock now, ms.
    pub fn now_ms(&self, clock: VClock) -> u64 {
        clock.unix_ms().saturating_add_signed(*lock(&self.offset_ms))
    }

    /// Its role now.
    pub fn role(&self) -> Role {
        lock(&self.instance).role()
    }
}

/// The replication stream from the master to the other server.
#[derive(Default)]
struct Stream {
    /// Effects on their way, with when they arrive and the stream they belong to.
    queue: VecDeque<(Instant, u64, Vec<Vec<u8>>)>,
    /// A promotion starts a new stream: effects of an older one never arrive.
    epoch: u64,
    /// No effect leaves while cut (the replication link is down, or the master is frozen).
    cut: bool,
}

/// The two servers, the routing and the stream.
pub struct Cluster {
    servers: [Arc<Server>; 2],
    /// The server clients are routed to (they follow a promotion).
    route: Mutex<usize>,
    stream: Mutex<Stream>,
    /// How long an effect takes to reach the replica.
    lag: Duration,
    clock: VClock,
}

impl Cluster {
    /// A primary and its replica, replicating with `lag`, on the world's clock.
    pub fn new(lag: Duration, clock: VClock) -> Arc<Self> {
        Arc::new(Self {
            servers: [
                Arc::new(Server::new("redis-primary", Role::Primary)),
                Arc::new(Server::new("redis-replica", Role::Replica)),
            ],
            route: Mutex::new(0),
            stream: Mutex::default(),
            lag,
            clock,
        })
    }

    /// Both servers.
    pub fn servers(&self) -> &[Arc<Server>; 2] {
        &self.servers
    }

    /// The server clients reach now.
    pub fn routed(&self) -> Arc<Server> {
        self.servers[*lock(&self.route)].clone()
    }

    /// Runs a client command on `server` now, on its clock; the routed master's effects go on
    /// the stream.
    pub fn exec(self: &Arc<Self>, server: &Server, args: &[Vec<u8>]) -> Reply {
        let now = server.now_ms(self.clock);
        let (reply, effects) = {
            let mut i = lock(&server.instance);
            let reply = i.exec(args, now);
            (reply, i.take_effects())
        };
        // A write on a master clients no longer reach (split brain) replicates nowhere.
        if !effects.is_empty() && std::ptr::eq(server, &*self.servers[*lock(&self.route)]) {
            self.send(effects);
        }
        reply
    }

    /// Puts effects on the stream and schedules their arrival.
    fn send(self: &Arc<Self>, effects: Vec<Vec<Vec<u8>>>) {
        let due = Instant::now() + self.lag;
        let epoch = {
            let mut s = lock(&self.stream);
            let epoch = s.epoch;
            s.queue.extend(effects.into_iter().map(|e| (due, epoch, e)));
            epoch
        };
        let me = self.clone();
        drop(tokio::spawn(async move {
            tokio::time::sleep_until(due).await;
            me.deliver(epoch);
        }));
    }

    /// Applies every effect of `epoch` that is due, in order, to the server clients are not
    /// routed to (the replica), unless the stream is cut.
    fn deliver(&self, epoch: u64) {
        let replica = self.servers[1 - *lock(&self.route)].clone();
        let mut s = lock(&self.stream);
        if s.cut || s.epoch != epoch {
            return;
        }
        let now = Instant::now();
        while s.queue.front().is_some_and(|(due, e, _)| *due <= now && *e == epoch) {
            let Some((_, _, effect)) = s.queue.pop_front() else { break };
            let at = replica.now_ms(self.clock);
            lock(&replica.instance).apply(&effect, at);
        }
    }

    /// Cuts or restores the stream (a frozen or isolated master sends nothing). Restored, what
    /// waited is delivered at once.
    pub fn set_cut(&self, cut: bool) {
        let epoch = {
            let mut s = lock(&self.stream);
            s.cut = cut;
            s.epoch
        };
        if !cut {
            self.deliver(epoch);
        }
    }

    /// Sentinel's promotion: the other server becomes master and clients follow it; what was on
    /// the stream is lost unless `drain` (a handover waits for the replica to catch up). The old
    /// master keeps its role until [`Cluster::demote`].
    pub fn promote(&self, drain: bool) -> usize {
        let lost = {
            let mut s = lock(&self.stream);
            if drain {
                let replica = self.servers[1 - *lock(&self.route)].clone();
                for (_, _, effect) in s.queue.drain(..) {
                    let at = replica.now_ms(self.clock);
                    lock(&replica.instance).apply(&effect, at);
                }
            }
            let lost = s.queue.len();
            s.queue.clear();
            s.epoch += 1;
            s.cut = false;
            lost
        };
        let mut route = lock(&self.route);
        *route = 1 - *route;
        lock(&self.servers[*route].instance).set_role(Role::Primary);
        lost
    }

    /// The old master back: demoted to a replica of the routed server and resynchronised (a full
    /// resync replaces its data with the master's).
    pub fn demote(&self) {
        let route = *lock(&self.route);
        let data = lock(&self.servers[route].instance).snapshot();
        let mut old = lock(&self.servers[1 - route].instance);
        old.resync(data);
    }
}

impl Cluster {
    /// Whether a promotion happened since `epoch` was read.
    pub fn epoch(&self) -> u64 {
        lock(&self.stream).epoch
    }
}
