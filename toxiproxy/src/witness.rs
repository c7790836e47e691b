//! The witness: what each proxy saw its clients send and receive, as [`WireRecord`]s (the run's
//! vocabulary, `leasequake_reports::wire`). Each connection's two pumps hand it their bytes: the
//! client's as they are read (stamped then, before any toxic acts: the client sent them no
//! later), the upstream's as they are written back to the client (stamped as the write begins:
//! the client cannot have them earlier). A connection
//! speaks RESP or HTTP, told from its first bytes; requests and replies pair in order. A proxy's
//! records are kept in a bounded log, served by `GET /proxies/{name}/witness` (an extension:
//! Toxiproxy has no such route, and the harness then knows there is no witness).
//!
//! The witness records, it never acts: a parse that fails ends recording on that connection
//! (one `unreadable` record says so) and the bytes flow on untouched.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use leasequake_reports::wire::{lease_op, recorded_command, LeaseOp, Scripts, WireRecord, WireReply, WireRequest};

use crate::toxic::{Aim, AimedCommand};
use serde_json::{json, Value};

mod http;
mod resp;

use resp::Frame;

/// Records one proxy keeps; past it the oldest go, counted as lost.
pub const RECORDS_MAX: usize = 100_000;
/// The most bytes of one direction buffered while a frame is incomplete.
const BUFFER_MAX: usize = 4 << 20;

/// CLOCK_MONOTONIC now, ns: the axis every process on the machine shares (containers included).
#[must_use]
pub fn mono_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    u64::try_from(t.tv_sec)
        .unwrap_or(0)
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::try_from(t.tv_nsec).unwrap_or(0))
}

/// The Lua scripts seen loaded or run through any proxy of the server (Redis keeps one script
/// cache for every client: a node may run a script another loaded).
pub type SharedScripts = Arc<Mutex<Scripts>>;

/// One proxy's records.
#[derive(Default)]
pub struct Log {
    inner: Mutex<Inner>,
    conns: std::sync::atomic::AtomicU64,
    scripts: SharedScripts,
}

#[derive(Default)]
struct Inner {
    records: VecDeque<WireRecord>,
    /// The seq of `records[0]` (the next seq when empty).
    first: u64,
    lost: u64,
}

impl Log {
    /// An empty log; its first record will be seq 1. Scripts it sees go to `scripts`.
    #[must_use]
    pub fn new(scripts: SharedScripts) -> Arc<Self> {
        Arc::new(Self { inner: Mutex::new(Inner { first: 1, ..Inner::default() }), scripts, ..Self::default() })
    }

    fn learn(&self, request: &WireRequest) {
        self.scripts.lock().unwrap_or_else(PoisonError::into_inner).heard(request);
    }

    /// Whether record `seq` does `aim.command` to `aim.key` (`reports::wire::lease_op`: a command
    /// that both acquires and renews is a renewal when this proxy's client acquired the key with
    /// its token before, as aioredlock's one script does).
    #[must_use]
    pub fn aimed(&self, seq: u64, aim: &Aim) -> bool {
        let scripts = self.scripts.lock().unwrap_or_else(PoisonError::into_inner).clone();
        let l = self.lock();
        let Some(at) = seq.checked_sub(l.first).and_then(|i| usize::try_from(i).ok()) else { return false };
        let Some(r) = l.records.get(at) else { return false };
        let op = lease_op(r, l.records.iter().take(at), &aim.key, &scripts);
        match aim.command {
            AimedCommand::Acquire => op == Some(LeaseOp::Acquire),
            AimedCommand::Renew => op == Some(LeaseOp::Renew),
            AimedCommand::Release => op == Some(LeaseOp::Release),
            AimedCommand::Lease => op.is_some(),
        }
    }

    /// Marks record `seq` as held by the proxy.
    pub fn held(&self, seq: u64) {
        let mut l = self.lock();
        let Some(i) = seq.checked_sub(l.first).and_then(|i| usize::try_from(i).ok()) else { return };
        if let Some(r) = l.records.get_mut(i) {
            r.held = true;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn push(&self, mut r: WireRecord) -> u64 {
        let mut l = self.lock();
        let seq = l.first + l.records.len() as u64;
        r.seq = seq;
        if l.records.len() >= RECORDS_MAX {
            l.records.pop_front();
            l.first += 1;
            l.lost += 1;
        }
        l.records.push_back(r);
        seq
    }

    fn answer(&self, seq: u64, reply: WireReply, reply_ns: Option<u64>, lost: bool) {
        let mut l = self.lock();
        let Some(i) = seq.checked_sub(l.first) else { return };
        if let Some(r) = usize::try_from(i).ok().and_then(|i| l.records.get_mut(i)) {
            r.reply = Some(reply);
            r.reply_ns = reply_ns;
            r.lost = lost && reply_ns.is_none();
        }
    }

    /// A connection of this proxy, numbered.
    #[must_use]
    pub fn conn(self: &Arc<Self>, link: &str) -> Arc<Mutex<Conn>> {
        let n = self.conns.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        Arc::new(Mutex::new(Conn::new(self.clone(), link, n)))
    }

    /// The records after seq `after`, at most `limit`, as the API serves them: `first` (the
    /// oldest kept), `next` (the seq the next record will get), `lost` (records dropped for room).
    #[must_use]
    pub fn page(&self, after: u64, limit: usize) -> Value {
        let l = self.lock();
        let skip = usize::try_from(after.saturating_add(1).saturating_sub(l.first)).unwrap_or(usize::MAX);
        let records: Vec<&WireRecord> = l.records.iter().skip(skip).take(limit).collect();
        json!({
            "first": l.first,
            "next": l.first + l.records.len() as u64,
            "lost": l.lost,
            "records": records,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Proto {
    Unknown,
    Resp,
    Http,
    /// Recording ended on this connection.
    Off,
}

/// One connection's witness: both directions' unparsed bytes and the requests awaiting replies.
pub struct Conn {
    log: Arc<Log>,
    link: String,
    conn: u64,
    proto: Proto,
    up: Vec<u8>,
    /// When the first byte of `up` was read.
    up_ns: u64,
    down: Vec<u8>,
    pending: VecDeque<u64>,
    /// The request whose reply this connection must lose (`lose_reply`).
    lose: Option<u64>,
    /// When the client's first bytes arrived, if before the proxy could read them (it reads once
    /// the upstream is connected): the first request's stamp.
    arrived: Option<u64>,
}

impl Conn {
    fn new(log: Arc<Log>, link: &str, conn: u64) -> Self {
        Self {
            log,
            link: link.to_owned(),
            conn,
            proto: Proto::Unknown,
            up: Vec::new(),
            up_ns: 0,
            down: Vec::new(),
            pending: VecDeque::new(),
            lose: None,
            arrived: None,
        }
    }

    /// The client's first bytes arrived at `ns`, before the proxy read them.
    pub fn arrived(&mut self, ns: u64) {
        self.arrived = Some(ns);
    }

    /// Marks request `seq` (this connection's) as the one whose reply is lost.
    pub fn lose(&mut self, seq: u64) {
        self.lose = Some(seq);
    }

    /// Where in `data` (bytes from upstream, not yet handed to [`Self::answered`]) the reply to
    /// the request this connection must lose begins (0 when it began in an earlier chunk);
    /// `None` when there is none to lose or it does not begin before `data` ends.
    #[must_use]
    pub fn lost_from(&self, data: &[u8]) -> Option<usize> {
        let seq = self.lose?;
        if self.proto != Proto::Resp {
            return None;
        }
        let before = self.pending.iter().position(|s| *s == seq)?;
        let mut buf = self.down.clone();
        buf.extend_from_slice(data);
        let (mut at, mut replies) = (0, 0);
        // Bounded by `buf`: every turn consumes a frame or returns.
        while replies < before {
            match resp::reply(&buf[at..]) {
                Frame::Done(v, used) => {
                    at += used;
                    replies += usize::from(v.is_some());
                }
                Frame::Partial | Frame::Bad(_) => return None,
            }
        }
        let from = at.saturating_sub(self.down.len());
        (from < data.len()).then_some(from)
    }

    /// Bytes the client sent, read at `at_ns`; `forwarded`: whether they went on upstream.
    /// Returns the requests they completed: where each began in `data` (negative: in an earlier
    /// chunk) and its seq.
    pub fn sent(&mut self, data: &[u8], at_ns: u64, forwarded: bool) -> Vec<(isize, u64)> {
        let mut done = Vec::new();
        if self.proto == Proto::Unknown {
            self.proto = if http_method(data) { Proto::Http } else { Proto::Resp };
        }
        if self.proto == Proto::Off {
            return done;
        }
        if self.up.is_empty() {
            self.up_ns = self.arrived.take().map_or(at_ns, |a| a.min(at_ns));
        }
        // Where the buffer's first byte is, relative to `data`.
        let mut start = -isize::try_from(self.up.len()).unwrap_or(isize::MAX);
        self.up.extend_from_slice(data);
        // Bounded by the buffer: every turn consumes a frame or stops.
        loop {
            let parsed = match self.proto {
                Proto::Http => http::request(&self.up),
                _ => resp::command(&self.up).map(|args, _| recorded_command(&args)),
            };
            match parsed {
                Frame::Done(request, used) => {
                    let sent_ns = self.up_ns;
                    self.up.drain(..used);
                    self.up_ns = at_ns;
                    self.log.learn(&request);
                    done.push((start, self.record(request, sent_ns, forwarded)));
                    start = start.saturating_add_unsigned(used);
                }
                Frame::Partial if self.up.len() <= BUFFER_MAX => return done,
                Frame::Partial => {
                    self.stop(format!("a request of over {BUFFER_MAX} bytes"), at_ns);
                    return done;
                }
                Frame::Bad(why) => {
                    self.stop(why, at_ns);
                    return done;
                }
            }
        }
    }

    /// The proxy's log this connection records into.
    #[must_use]
    pub fn log(&self) -> &Arc<Log> {
        &self.log
    }

    fn record(&mut self, request: WireRequest, sent_ns: u64, forwarded: bool) -> u64 {
        let seq = self.log.push(WireRecord {
            seq: 0,
            link: self.link.clone(),
            conn: self.conn,
            sent_ns,
            forwarded,
            request,
            reply_ns: None,
            reply: None,
            held: false,
            lost: false,
        });
        self.pending.push_back(seq);
        seq
    }

    /// Bytes from upstream, whose write to the client began at `delivered_ns` (`None`: dropped by a
    /// toxic).
    pub fn answered(&mut self, data: &[u8], delivered_ns: Option<u64>) {
        if matches!(self.proto, Proto::Off | Proto::Unknown) {
            return;
        }
        self.down.extend_from_slice(data);
        // Bounded by the buffer: every turn consumes a frame or stops.
        loop {
            let (reply, used, to_close) = match self.proto {
                Proto::Http => match http::response(&self.down) {
                    Frame::Done((status, to_close), used) => {
                        (status.map(|s| WireReply::Http { status: s }), used, to_close)
                    }
                    Frame::Partial => return self.overflow(delivered_ns),
                    Frame::Bad(why) => return self.stop(why, delivered_ns.unwrap_or_else(mono_ns)),
                },
                _ => match resp::reply(&self.down) {
                    Frame::Done(v, used) => (v.map(WireReply::Redis), used, false),
                    Frame::Partial => return self.overflow(delivered_ns),
                    Frame::Bad(why) => return self.stop(why, delivered_ns.unwrap_or_else(mono_ns)),
                },
            };
            self.down.drain(..used);
            if let Some(reply) = reply {
                match self.pending.pop_front() {
                    Some(seq) => self.log.answer(seq, reply, delivered_ns, self.lose == Some(seq)),
                    None => return self.stop("a reply to no request".into(), delivered_ns.unwrap_or_else(mono_ns)),
                }
            }
            if to_close {
                // The body runs to the end: nothing after it can be paired.
                self.proto = Proto::Off;
                return;
            }
        }
    }

    fn overflow(&mut self, delivered_ns: Option<u64>) {
        if self.down.len() > BUFFER_MAX {
            self.stop(format!("a reply of over {BUFFER_MAX} bytes"), delivered_ns.unwrap_or_else(mono_ns));
        }
    }

    /// Ends recording on this connection, with one record saying why.
    fn stop(&mut self, why: String, at_ns: u64) {
        self.proto = Proto::Off;
        self.up = Vec::new();
        self.down = Vec::new();
        let _ = self.record(WireRequest::Unreadable { why }, at_ns, true);
    }
}

fn http_method(data: &[u8]) -> bool {
    ["GET ", "POST ", "PUT ", "DELETE ", "HEAD ", "PATCH ", "OPTIONS "].iter().any(|m| data.starts_with(m.as_bytes()))
}

#[cfg(test)]
mod tests;
