//! The simulated network and Redis's availability: each node's two links (to Redis and to the
//! store) with their faults, and the primary's. A request is handed to the world when it is sent
//! (a task of its own), so a crash of the sender does not unsend it: it still runs on Redis, as
//! a command already on the wire does. Faults are read as the request travels: a reset link fails
//! at once, a blackholed one never answers (the caller's timeout ends the wait), a slow one adds
//! latency, a link losing replies runs the command and drops the reply, then the connection.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use redis::{RedisError, Value};
use tokio::time::Instant;

use super::cluster::{Cluster, Server};
use super::witness::{resp, Witness};

/// The witness a request is recorded by, and the link's name (`n1-redis`).
pub type Witnessed = Option<(Arc<Witness>, String)>;

/// How long a connection lives under `lose_replies` before it is cut (the container lane's).
const LOSE_REPLIES_CUT: Duration = Duration::from_millis(100);

/// One link's faults, each in effect until an instant.
#[derive(Debug, Default, Clone)]
pub struct LinkFaults {
    /// Packets dropped: no answer.
    pub blackhole_until: Option<Instant>,
    /// Connections reset: immediate errors.
    pub reset_until: Option<Instant>,
    /// Extra latency each way, until.
    pub slow: Option<(Duration, Instant)>,
    /// Replies dropped after the command ran.
    pub lose_replies_until: Option<Instant>,
    /// The reply to the next command that does this to the lease key (read as the witness reads
    /// it) is dropped after it ran, once, until.
    pub lose_next: Option<(String, crate::scenario::Aimed, Instant)>,
    /// Extra latency on the requests of the lease commands aimed at (`slow_redis` with a
    /// `command`), until.
    pub slow_aimed: Option<(String, crate::scenario::Aimed, Duration, Instant)>,
}

impl LinkFaults {
    fn active(until: Option<Instant>) -> bool {
        until.is_some_and(|u| Instant::now() < u)
    }

    fn extra(&self) -> Duration {
        self.slow.filter(|(_, u)| Instant::now() < *u).map_or(Duration::ZERO, |(d, _)| d)
    }
}

/// A link and its faults.
#[derive(Debug, Default)]
pub struct Link {
    faults: Mutex<LinkFaults>,
}

impl Link {
    /// Changes the link's faults.
    pub fn set(&self, f: impl FnOnce(&mut LinkFaults)) {
        f(&mut self.faults.lock().unwrap_or_else(PoisonError::into_inner));
    }

    fn now(&self) -> LinkFaults {
        self.faults.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

/// What happened to a request on its way.
#[derive(Debug)]
pub enum Lost {
    /// The connection was reset or refused: not delivered.
    Reset,
    /// Delivered (it ran), but the reply was lost and the connection cut.
    ReplyLost,
}

/// The commands `CLIENT PAUSE WRITE` holds (scripts may write, so they wait too).
fn writes(args: &[Vec<u8>]) -> bool {
    let name = args.first().map(|n| String::from_utf8_lossy(n).to_ascii_lowercase()).unwrap_or_default();
    matches!(name.as_str(), "set" | "del" | "incr" | "pexpire" | "pexpireat" | "eval" | "evalsha")
}

/// Sends one command over `link` to the server clients are routed to and waits for the reply.
pub async fn redis_request(
    link: Arc<Link>,
    cluster: Arc<Cluster>,
    args: Vec<Vec<u8>>,
    latency: Duration,
    witness: Witnessed,
) -> Result<Value, RedisError> {
    let at_send = link.now();
    let server = cluster.routed();
    let request = leasequake_reports::wire::recorded_command(&args);
    let record = |forwarded| witness.as_ref().map(|(w, name)| (w.clone(), w.sent(name, request.clone(), forwarded)));
    if LinkFaults::active(at_send.reset_until) || Server::until(&server.down_until).is_some() {
        record(false);
        // The reset comes back after a round trip: never at no cost in virtual time, or a client
        // that retries at once would spin without the world's clock ever moving.
        tokio::time::sleep(2 * latency).await;
        return Err(reset("connection reset by peer"));
    }
    if LinkFaults::active(at_send.blackhole_until) {
        record(false);
        return std::future::pending().await;
    }
    let aimed = aimed_at(&link, &at_send, &request, &witness);
    let delayed = aimed_delay(&at_send, &request, &witness);
    let sent = record(true);
    let answered = move |v: &Value, delivered: bool| {
        if let Some((w, s)) = &sent {
            w.answered(s, leasequake_reports::wire::WireReply::Redis(resp(v)), delivered);
            if aimed && !delivered {
                w.lost(s);
            }
        }
    };
    // On the wire: a task of the world's, which the sender's crash does not cancel.
    let travel = tokio::spawn(async move {
        tokio::time::sleep(latency + at_send.extra() + delayed).await;
        if Server::until(&server.down_until).is_some() {
            return Err(Lost::Reset);
        }
        // A frozen server holds the request until it runs again.
        while let Some(until) = Server::until(&server.frozen_until) {
            tokio::time::sleep_until(until).await;
        }
        if writes(&args) {
            while let Some(until) = Server::until(&server.writes_paused_until) {
                tokio::time::sleep_until(until).await;
            }
        }
        let reply = cluster.exec(&server, &args).to_value();
        let back = link.now();
        if aimed {
            answered(&reply, false);
            tokio::time::sleep(latency).await;
            return Err(Lost::ReplyLost);
        }
        if LinkFaults::active(back.lose_replies_until) {
            answered(&reply, false);
            tokio::time::sleep(LOSE_REPLIES_CUT).await;
            return Err(Lost::ReplyLost);
        }
        if LinkFaults::active(back.blackhole_until) {
            answered(&reply, false);
            return std::future::pending().await;
        }
        tokio::time::sleep(latency + back.extra()).await;
        answered(&reply, true);
        Ok(reply)
    });
    match travel.await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(Lost::Reset)) => Err(reset("connection reset by peer")),
        Ok(Err(Lost::ReplyLost)) => Err(reset("connection closed before the reply")),
        Err(_) => Err(reset("the simulation ended")),
    }
}

/// Whether `request` is the one an aimed `lose_replies` on `link` waits for; if so the fault is
/// spent (once, as the proxy's `lose_reply`).
fn aimed_at(
    link: &Link,
    faults: &LinkFaults,
    request: &leasequake_reports::wire::WireRequest,
    witness: &Witnessed,
) -> bool {
    let Some((key, aimed, until)) = &faults.lose_next else { return false };
    let Some((w, name)) = witness else { return false };
    if Instant::now() >= *until || !aimed.hits(w.lease_op(name, request, key)) {
        return false;
    }
    link.set(|l| l.lose_next = None);
    true
}

/// The extra latency an aimed `slow_redis` puts on `request`'s way to Redis.
fn aimed_delay(faults: &LinkFaults, request: &leasequake_reports::wire::WireRequest, witness: &Witnessed) -> Duration {
    let Some((key, aimed, extra, until)) = &faults.slow_aimed else { return Duration::ZERO };
    match witness {
        Some((w, name)) if Instant::now() < *until && aimed.hits(w.lease_op(name, request, key)) => *extra,
        _ => Duration::ZERO,
    }
}

fn reset(what: &'static str) -> RedisError {
    RedisError::from(std::io::Error::new(std::io::ErrorKind::ConnectionReset, what))
}

/// Whether a store request gets through `link` now: `Err(true)` reset (not delivered), a pending
/// future for a blackhole; else the extra latency each way.
pub fn store_link(link: &Link) -> Result<Duration, bool> {
    let f = link.now();
    if LinkFaults::active(f.reset_until) {
        return Err(true);
    }
    if LinkFaults::active(f.blackhole_until) {
        return Err(false);
    }
    Ok(f.extra())
}
