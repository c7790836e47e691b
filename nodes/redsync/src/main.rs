//! A node on the `redsync` crate (the Redlock algorithm for Rust), speaking the node protocol
//! (docs/node-protocol.md, version 3): the library's `lock`, `extend` (every renewal interval,
//! from this node's renewal thread: the library has no renewal of its own) and `unlock`, and its
//! validity (`Lock::expiry`, the Redlock validity time) as the ownership check; the pipeline as
//! the Python node runs it. Every place the library forced a deviation says so ("library:").
//! One Redis master: Redlock's quorum of one.

use std::io::{BufRead, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use leasequake_reports::history::{EventKind, FenceSource, NodeCommand, NodeConfig, NodeEvent};
use redsync::{Lock, RedisInstance, Redsync, RedsyncBuilder, RedsyncError};

/// The protocol version spoken: 3, for a token the library picks (20 alphanumerics).
const PROTOCOL: u32 = 3;

fn mono_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    u64::try_from(t.tv_sec).unwrap_or(0).saturating_mul(1_000_000_000).saturating_add(t.tv_nsec as u64)
}

fn guard<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Events to stdout, one line each, stamped with the round.
struct Out {
    round: AtomicU64,
    stdout: Mutex<std::io::Stdout>,
}

impl Out {
    fn emit(&self, kind: EventKind) {
        let event = NodeEvent { mono_ns: mono_ns(), round: self.round.load(Ordering::SeqCst), kind };
        let mut line = serde_json::to_string(&event).unwrap_or_default();
        line.push('\n');
        let mut out = guard(&self.stdout);
        let _ = out.write_all(line.as_bytes());
        let _ = out.flush();
    }
}

/// What the harness's commands set.
#[derive(Default)]
struct Commands {
    stopped: AtomicBool,
    stall_until_ns: AtomicU64,
    slow_model_ms: AtomicU64,
    go: Mutex<Vec<u8>>,
}

/// Reads commands until stdin closes (the harness is gone: exit at once).
fn read_commands(c: Arc<Commands>) {
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        match serde_json::from_str::<NodeCommand>(&line) {
            Ok(NodeCommand::Stop) => c.stopped.store(true, Ordering::SeqCst),
            Ok(NodeCommand::StallRenewal { ms }) => {
                c.stall_until_ns.store(mono_ns().saturating_add(ms.saturating_mul(1_000_000)), Ordering::SeqCst);
            }
            Ok(NodeCommand::SlowModel { ms }) => c.slow_model_ms.store(ms, Ordering::SeqCst),
            Ok(NodeCommand::Go { checkpoint }) => guard(&c.go).push(checkpoint),
            Ok(NodeCommand::Start | NodeCommand::Config(_)) => {}
            Err(e) => eprintln!("unreadable command: {e}"),
        }
    }
    std::process::exit(0);
}

/// A lost lease, with the reason.
#[derive(Debug)]
struct Lost(String);

/// One acquisition: the library's lock (replaced by each extension), the sticky loss.
struct Held {
    token: String,
    state: Mutex<(Lock, Option<String>)>,
    stop: AtomicBool,
}

impl Held {
    /// A decision: the clock, then the loss and the validity, under the state's lock; `then`
    /// emits the decision's event while it is held.
    fn decide(&self, out: &Out, checkpoint: Option<u8>, then: impl FnOnce(u64)) -> Result<(), Lost> {
        let mut s = guard(&self.state);
        let decided = mono_ns();
        if let Some(why) = &s.1 {
            return Err(Lost(why.clone()));
        }
        // library: no ownership read; the Redlock way is the lock's validity (expiry).
        if Instant::now() >= s.0.expiry {
            s.1 = Some("expired".into());
            out.emit(EventKind::OwnershipLost { token: self.token.clone(), reason: "expired".into(), checkpoint });
            return Err(Lost("expired".into()));
        }
        then(decided);
        Ok(())
    }

    /// Work a loss cancels at once: sleeps `ms` in slices, checking the loss and the validity.
    fn wait(&self, out: &Out, ms: u64) -> Result<(), Lost> {
        let end = Instant::now() + Duration::from_millis(ms);
        while Instant::now() < end {
            self.decide(out, None, |_| {})?;
            thread::sleep(Duration::from_millis(5).min(end.saturating_duration_since(Instant::now())));
        }
        Ok(())
    }
}

struct Node {
    cfg: NodeConfig,
    out: Arc<Out>,
    cmds: Arc<Commands>,
    dlm: Arc<Redsync<RedisInstance>>,
    key: String,
    call: u64,
    rng: u64,
    pending_sync: Option<u8>,
    /// The token of the acquisition in hand (for `sync_point`).
    current_token: String,
}

impl Node {
    fn jitter_ms(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        5 + self.rng % 45
    }

    fn acquire(&mut self) -> Option<(Arc<Held>, u64, u64)> {
        let deadline = Instant::now() + Duration::from_millis(self.cfg.lease.acquire_wait_ms);
        let ttl = Duration::from_millis(self.cfg.lease.ttl_ms);
        while !self.cmds.stopped.load(Ordering::SeqCst) {
            let sent = mono_ns();
            let reason;
            match self.dlm.lock(&self.key, ttl) {
                Ok(lock) => match self.fence() {
                    Ok(fence) => return Some((self.hold(lock), fence, sent)),
                    Err(e) => {
                        reason = e;
                        let _ = self.dlm.unlock(&lock);
                    }
                },
                Err(e) => reason = e.to_string(),
            }
            if Instant::now() >= deadline {
                self.out.emit(EventKind::AcquireTimedOut { reason });
                return None;
            }
            let pause = self.jitter_ms();
            thread::sleep(Duration::from_millis(pause));
        }
        None
    }

    /// library: no fence; the counter is a second command, not atomic with the acquire (the
    /// lock is released when it fails). Under store fences, the round asks the store instead.
    fn fence(&self) -> Result<u64, String> {
        if self.cfg.fence_source == FenceSource::Store {
            return Ok(0);
        }
        let timeout = Duration::from_millis(self.cfg.lease.command_timeout_ms.max(1));
        let client = redis::Client::open(self.cfg.redis_url.as_str()).map_err(|e| e.to_string())?;
        let mut conn = client.get_connection_with_timeout(timeout).map_err(|e| e.to_string())?;
        conn.set_read_timeout(Some(timeout)).map_err(|e| e.to_string())?;
        conn.set_write_timeout(Some(timeout)).map_err(|e| e.to_string())?;
        redis::cmd("INCR")
            .arg(format!("leasequake:{{{}}}:fence", self.cfg.tenant))
            .query(&mut conn)
            .map_err(|e| e.to_string())
    }

    /// The acquisition, with its renewal thread.
    fn hold(&self, lock: Lock) -> Arc<Held> {
        let held =
            Arc::new(Held { token: lock.value.clone(), state: Mutex::new((lock, None)), stop: AtomicBool::new(false) });
        let (h, out, cmds, dlm) = (held.clone(), self.out.clone(), self.cmds.clone(), self.dlm.clone());
        let (renew, ttl) =
            (Duration::from_millis(self.cfg.lease.renew_ms), Duration::from_millis(self.cfg.lease.ttl_ms));
        // Detached: a library call without a read timeout may never return (library: redsync
        // sets a connect timeout only, a hundredth of the ttl).
        thread::spawn(move || renew_loop(&h, &out, &cmds, &dlm, renew, ttl));
        held
    }
}

/// Extends the lock every `renew` until the lease ends: the library's `extend`, reported.
fn renew_loop(h: &Held, out: &Out, cmds: &Commands, dlm: &Redsync<RedisInstance>, renew: Duration, ttl: Duration) {
    loop {
        thread::sleep(renew);
        let stall = cmds.stall_until_ns.load(Ordering::SeqCst).saturating_sub(mono_ns());
        thread::sleep(Duration::from_nanos(stall));
        let sent = mono_ns();
        let lock = {
            let s = guard(&h.state);
            if h.stop.load(Ordering::SeqCst) || s.1.is_some() {
                return;
            }
            Lock { resource: s.0.resource.clone(), value: s.0.value.clone(), ttl, expiry: s.0.expiry }
        };
        let result = dlm.extend(&lock, ttl);
        let mut s = guard(&h.state);
        if h.stop.load(Ordering::SeqCst) || s.1.is_some() {
            return;
        }
        let lost = match result {
            Ok(extended) if Instant::now() < s.0.expiry => {
                s.0 = extended;
                out.emit(EventKind::Renewed { token: h.token.clone(), sent_ns: Some(sent) });
                continue;
            }
            Ok(_) => "renewal_late",
            Err(RedsyncError::ExtendRetriesExceeded(errors)) if errors.includes(RedsyncError::InvalidLease) => {
                "renewal_rejected"
            }
            Err(_) => "renewal_failed",
        };
        s.1 = Some(lost.to_owned());
        out.emit(EventKind::OwnershipLost { token: h.token.clone(), reason: lost.into(), checkpoint: None });
        return;
    }
}

fn main() {
    std::process::exit(run());
}

fn run() -> i32 {
    let out = Arc::new(Out { round: AtomicU64::new(0), stdout: Mutex::new(std::io::stdout()) });
    let mut first = String::new();
    let _ = std::io::stdin().lock().read_line(&mut first);
    let cfg = match serde_json::from_str::<NodeCommand>(&first) {
        Ok(NodeCommand::Config(c)) if (c.protocol..=c.protocol_max.unwrap_or(c.protocol)).contains(&PROTOCOL) => *c,
        _ => {
            out.emit(EventKind::Error { message: format!("expected a config line offering protocol {PROTOCOL}") });
            return 2;
        }
    };
    out.emit(EventKind::Hello {
        protocol: PROTOCOL,
        implementation: "redsync-node 0.1 on redsync 1.0.1, one master".into(),
        lease_key: None,
        renewals: None,
    });
    let cmds = Arc::new(Commands::default());
    let started = wait_for_start();
    let reader = cmds.clone();
    thread::spawn(move || read_commands(reader));
    match RedisInstance::new(cfg.redis_url.as_str()) {
        Ok(instance) if started => {
            // library: retry_count 1, so the node's acquire loop (bounded by acquire_wait_ms) retries.
            let dlm = Arc::new(RedsyncBuilder::new(vec![instance]).retry_count(1).build());
            let key = format!("leasequake:{{{}}}:lease", cfg.tenant);
            let rng = cfg.seed | 1;
            let mut node = Node {
                cfg,
                out: out.clone(),
                cmds,
                dlm,
                key,
                call: 0,
                rng,
                pending_sync: None,
                current_token: String::new(),
            };
            node.rounds();
        }
        Ok(_) => {}
        Err(e) => out.emit(EventKind::Error { message: format!("redsync: {e}") }),
    }
    out.emit(EventKind::Stopped);
    0
}

/// Reads lines until `start` (true) or `stop` / the end of stdin (false).
fn wait_for_start() -> bool {
    let mut line = String::new();
    loop {
        line.clear();
        if std::io::stdin().lock().read_line(&mut line).unwrap_or(0) == 0 {
            std::process::exit(0);
        }
        match serde_json::from_str::<NodeCommand>(&line) {
            Ok(NodeCommand::Start) => return true,
            Ok(NodeCommand::Stop) => return false,
            _ => {}
        }
    }
}

/// The store, over HTTP/1.1 (one connection per call, closed after it).
fn http(
    addr: &str,
    method: &str,
    path: &str,
    body: &str,
    timeout: Duration,
) -> Result<(u16, serde_json::Value), String> {
    let sock = addr.to_socket_addrs().map_err(|e| e.to_string())?.next().ok_or("no address")?;
    let mut s = TcpStream::connect_timeout(&sock, timeout).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(timeout)).map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(timeout)).map_err(|e| e.to_string())?;
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: store\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&raw);
    let status = text.split(' ').nth(1).and_then(|c| c.parse().ok()).ok_or("no status line")?;
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    Ok((status, serde_json::from_str(body).unwrap_or(serde_json::Value::Null)))
}

mod round;
