//! One proxied connection: two pumps (upstream, downstream) that read chunks and apply the
//! proxy's current toxics to them. Toxics are read from a `watch` channel on every chunk and on
//! every change, so they apply to connections already open. Takes no lock shared with the API.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::Rng;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::{sleep, sleep_until, Instant};
use tokio_util::sync::CancellationToken;
use tracing::debug;

use crate::toxic::{ms, Aim, Effect, Stream, Toxic};
use crate::witness::{mono_ns, Conn};

/// A connection's witness, shared by its two pumps.
pub type Witness = std::sync::Arc<std::sync::Mutex<Conn>>;

/// The toxics of a proxy, shared with its links.
pub type Toxics = watch::Receiver<Arc<Vec<Toxic>>>;

const CHUNK: usize = 32 * 1024;
/// A link's first read buffer, grown to [`CHUNK`] when a read fills it.
const FIRST_CHUNK: usize = 4 * 1024;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How a pump ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// Its source closed; it closed its destination's write side.
    Eof,
    /// The connection must close now (killed, limit reached, timeout toxic).
    Close,
    /// The connection must be reset (reset_peer).
    Reset,
}

/// Serves one accepted client until either side closes, a toxic ends it, or `kill` fires.
pub async fn serve(
    client: TcpStream,
    upstream: String,
    toxics: Toxics,
    kill: CancellationToken,
    seed: u64,
    witness: Witness,
) {
    let connect = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(&upstream));
    tokio::pin!(connect);
    // The client may send before the upstream is connected: when its first bytes arrived is
    // noted, so the witness's stamp of its first request is not the connect's time.
    let mut arrived_ns = None;
    // Bounded by the connect's timeout.
    let server = loop {
        tokio::select! {
            () = kill.cancelled() => return,
            r = &mut connect => break match r {
                Ok(Ok(s)) => s,
                // Toxiproxy closes the client when the upstream cannot be reached.
                _ => { debug!(upstream, "unable to open connection to upstream"); return; }
            },
            ready = client.readable(), if arrived_ns.is_none() => {
                arrived_ns = Some(mono_ns());
                if ready.is_err() { return; }
            }
        }
    };
    if let Some(ns) = arrived_ns {
        witness.lock().unwrap_or_else(std::sync::PoisonError::into_inner).arrived(ns);
    }
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (cr, cw) = client.into_split();
    let (sr, sw) = server.into_split();
    let local = kill.child_token();
    let up = Pump::new(Stream::Upstream, toxics.clone(), local.clone(), seed, witness.clone());
    let down = Pump::new(Stream::Downstream, toxics, local.clone(), seed.rotate_left(17) ^ 0x9e37_79b9, witness);
    let ((cr, sw, e1), (sr, cw, e2)) = tokio::join!(up.run(cr, sw), down.run(sr, cw));
    let reset = e1 == End::Reset || e2 == End::Reset;
    if let (Ok(client), Ok(server)) = (cr.reunite(cw), sr.reunite(sw)) {
        if reset {
            // SO_LINGER 0: closing sends RST, which the peers see as "connection reset".
            #[allow(deprecated)]
            {
                let _ = client.set_linger(Some(Duration::ZERO));
                let _ = server.set_linger(Some(Duration::ZERO));
            }
        }
        drop((client, server));
    }
}

struct Pump {
    stream: Stream,
    toxics: Toxics,
    kill: CancellationToken,
    rng: StdRng,
    /// Per toxic name: whether it applies to this connection (toxicity, rolled once), when this
    /// connection first saw it, and bytes passed under it (limit_data).
    seen: BTreeMap<String, (bool, Instant, u64)>,
    witness: Witness,
    /// Bytes a `hold` keeps back (from the first aimed command on), in order.
    held: Vec<u8>,
    holding: bool,
}

/// The most bytes a hold keeps back; past it the pump reads no more until released.
const HELD_MAX: usize = 1 << 20;

impl Pump {
    fn new(stream: Stream, toxics: Toxics, kill: CancellationToken, seed: u64, witness: Witness) -> Self {
        use rand::SeedableRng;
        let rng = StdRng::seed_from_u64(seed);
        Self { stream, toxics, kill, rng, seen: BTreeMap::new(), witness, held: Vec::new(), holding: false }
    }

    /// Hands the witness a chunk: a client's as read at `at_ns` (`forwarded`: sent on), an
    /// upstream's as it began to be written to the client at `at_ns` (`None`: dropped). A reply
    /// is stamped before its write, never after: the client cannot have read it earlier. Returns
    /// the client's requests the chunk completed (where each began in it, its seq).
    fn witness(&self, data: &[u8], at_ns: Option<u64>, forwarded: bool) -> Vec<(isize, u64)> {
        let mut w = self.witness.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match self.stream {
            Stream::Upstream => w.sent(data, at_ns.unwrap_or_else(mono_ns), forwarded),
            Stream::Downstream => {
                w.answered(data, at_ns);
                Vec::new()
            }
        }
    }

    /// A client's requests under a `lose_reply`: the first one aimed at, if the toxic has not
    /// fired yet, is the one whose reply this connection loses.
    fn arm_lose(&self, done: &[(isize, u64)]) {
        let toxics = self.toxics.borrow().clone();
        let Some(t) = toxics.iter().find(|t| t.effect == Effect::LoseReply) else { return };
        let Some(aim) = &t.aim else { return };
        let log = self.log();
        if let Some((_, seq)) = done.iter().find(|(_, seq)| log.aimed(*seq, aim)) {
            if t.fired.fire() {
                self.witness.lock().unwrap_or_else(std::sync::PoisonError::into_inner).lose(*seq);
            }
        }
    }

    /// The aimed latencies in effect that a client's chunk completed a command of (their names).
    fn aimed_latency(&self, active: &[(Toxic, Instant)], done: &[(isize, u64)]) -> Vec<String> {
        if done.is_empty() {
            return Vec::new();
        }
        let log = self.log();
        active
            .iter()
            .filter(|(t, _)| matches!(t.effect, Effect::Latency { .. }))
            .filter_map(|(t, _)| Some((t, t.aim.as_ref()?)))
            .filter(|(_, aim)| done.iter().any(|(_, seq)| log.aimed(*seq, aim)))
            .map(|(t, _)| t.name.clone())
            .collect()
    }

    /// Where a chunk from upstream begins the reply this connection must lose, if it does.
    fn lost_from(&self, data: &[u8]) -> Option<usize> {
        self.witness.lock().unwrap_or_else(std::sync::PoisonError::into_inner).lost_from(data)
    }

    fn log(&self) -> std::sync::Arc<crate::witness::Log> {
        self.witness.lock().unwrap_or_else(std::sync::PoisonError::into_inner).log().clone()
    }

    /// A client's chunk under a `hold` aimed at `aim`: where to hold from (the first aimed
    /// command that began in this chunk), and every request from there on marked held. `None`
    /// when nothing is held.
    fn hold_from(&mut self, data_len: usize, done: &[(isize, u64)], aim: Option<&Aim>) -> Option<usize> {
        if !self.holding && aim.is_none() {
            return None;
        }
        let log = self.log();
        let from = if self.holding {
            Some(0)
        } else {
            let aim = aim?;
            done.iter().find(|(start, seq)| *start >= 0 && log.aimed(*seq, aim)).map(|(s, _)| s.unsigned_abs())
        }?;
        for (_, seq) in
            done.iter().filter(|(start, _)| *start >= isize::try_from(from).unwrap_or(isize::MAX) || self.holding)
        {
            log.held(*seq);
        }
        self.holding = true;
        Some(from.min(data_len))
    }

    /// The toxics that apply to this direction of this connection now, in order.
    fn active(&mut self) -> Vec<(Toxic, Instant)> {
        let current = self.toxics.borrow_and_update().clone();
        self.seen.retain(|name, _| current.iter().any(|t| &t.name == name));
        let mut out = Vec::new();
        for t in current.iter().filter(|t| t.stream == self.stream) {
            let rng = &mut self.rng;
            let (on, since, _) = *self
                .seen
                .entry(t.name.clone())
                .or_insert_with(|| (t.toxicity >= 1.0 || rng.random::<f32>() < t.toxicity, Instant::now(), 0));
            if on {
                out.push((t.clone(), since));
            }
        }
        out
    }

    async fn run(mut self, mut src: OwnedReadHalf, mut dst: OwnedWriteHalf) -> (OwnedReadHalf, OwnedWriteHalf, End) {
        // Small while the link carries small messages (Redis commands): a thousand idle links
        // hold 8 MiB of buffers, not 64; grown once a read fills it.
        let mut buf = vec![0u8; FIRST_CHUNK];
        // Bounded by the connection: every turn reads, or ends on a close, reset or kill.
        let end = loop {
            let active = self.active();
            let reset_at = active.iter().find_map(|(t, since)| match t.effect {
                Effect::ResetPeer { timeout } => Some(*since + ms(timeout)),
                _ => None,
            });
            let blackhole = active.iter().find_map(|(t, since)| match t.effect {
                Effect::Timeout { timeout } => Some((timeout > 0).then(|| *since + ms(timeout))),
                _ => None,
            });
            let close_at = blackhole.flatten();
            let hold = active.iter().find_map(|(t, _)| (t.effect == Effect::Hold).then(|| t.aim.clone()).flatten());
            if self.holding && hold.is_none() {
                // Released: what was held goes on, in order, under the toxics in effect now.
                self.holding = false;
                let held = std::mem::take(&mut self.held);
                if let Err(end) = self.forward(&active, &held, Instant::now(), &mut dst, &[]).await {
                    break end;
                }
            }
            // A deadline already reached wins over data that is ready (tokio's timer would only
            // fire it on its next tick).
            let now = Instant::now();
            if reset_at.is_some_and(|t| t <= now) {
                break End::Reset;
            }
            if close_at.is_some_and(|t| t <= now) {
                break End::Close;
            }
            let far = Instant::now() + Duration::from_secs(86_400);
            tokio::select! {
                biased;
                () = self.kill.cancelled() => break End::Close,
                () = sleep_until(reset_at.unwrap_or(far)), if reset_at.is_some() => break End::Reset,
                () = sleep_until(close_at.unwrap_or(far)), if close_at.is_some() => break End::Close,
                changed = self.toxics.changed() => if changed.is_err() { break End::Close },
                read = src.read(&mut buf), if self.held.len() < HELD_MAX => {
                    let n = match read { Ok(0) | Err(_) => {
                        let delay = active.iter().find_map(|(t, _)| match t.effect { Effect::SlowClose { delay } => Some(delay), _ => None });
                        if let Some(d) = delay { self.wait(ms(d)).await; }
                        let _ = dst.shutdown().await;
                        break End::Eof;
                    } Ok(n) => n };
                    let grow = n == buf.len() && buf.len() < CHUNK;
                    let done = if self.stream == Stream::Upstream {
                        self.witness(&buf[..n], Some(mono_ns()), blackhole.is_none())
                    } else {
                        Vec::new()
                    };
                    if blackhole.is_some() {
                        if self.stream == Stream::Downstream {
                            self.witness(&buf[..n], None, false);
                        }
                        continue; // the timeout toxic drops data
                    }
                    let received = Instant::now();
                    if self.stream == Stream::Upstream {
                        self.arm_lose(&done);
                    } else if let Some(from) = self.lost_from(&buf[..n]) {
                        // What came before the lost reply goes on; the reply and the rest are
                        // dropped and the connection closed.
                        let forwarded = if from == 0 { Ok(mono_ns()) } else { self.forward(&active, &buf[..from], received, &mut dst, &[]).await };
                        self.witness(&buf[..from], forwarded.as_ref().ok().copied(), forwarded.is_ok());
                        self.witness(&buf[from..n], None, false);
                        break End::Close;
                    }
                    let until = match self.hold_from(n, &done, hold.as_ref()) {
                        Some(from) => {
                            self.held.extend_from_slice(&buf[from..n]);
                            from
                        }
                        None => n,
                    };
                    let aimed = self.aimed_latency(&active, &done);
                    let forwarded = if until == 0 { Ok(mono_ns()) } else { self.forward(&active, &buf[..until], received, &mut dst, &aimed).await };
                    if self.stream == Stream::Downstream {
                        self.witness(&buf[..n], forwarded.as_ref().ok().copied(), forwarded.is_ok());
                    }
                    if let Err(end) = forwarded {
                        break end;
                    }
                    if grow {
                        buf.resize(CHUNK, 0);
                    }
                }
            }
        };
        if end != End::Eof {
            // A half-close is not the end: the other direction may still carry the answer.
            self.kill.cancel();
        }
        (src, dst, end)
    }

    /// Writes all of `data` unless killed first: a peer that does not read cannot keep a killed
    /// connection (a deleted proxy's) open.
    async fn write(&self, dst: &mut OwnedWriteHalf, data: &[u8]) -> Result<(), End> {
        tokio::select! {
            biased;
            () = self.kill.cancelled() => Err(End::Close),
            written = dst.write_all(data) => written.map_err(|_| End::Close),
        }
    }

    /// Sleeps unless killed; returns whether it slept the whole time.
    async fn wait(&self, d: Duration) -> bool {
        if d.is_zero() {
            return true;
        }
        tokio::select! { () = self.kill.cancelled() => false, () = sleep(d) => true }
    }

    /// Writes `data` on under the toxics in effect; a toxic aimed at commands (a latency given a
    /// key) acts only when `aimed` names it (the chunk completed a command it aims at).
    async fn forward(
        &mut self,
        active: &[(Toxic, Instant)],
        data: &[u8],
        received: Instant,
        dst: &mut OwnedWriteHalf,
        aimed: &[String],
    ) -> Result<u64, End> {
        let mut data = data;
        let mut close_after = false;
        for (t, _) in active.iter().filter(|(t, _)| t.aim.is_none() || aimed.contains(&t.name)) {
            match t.effect {
                Effect::LimitData { bytes } => {
                    let entry = self.seen.get_mut(&t.name).map(|e| &mut e.2);
                    let passed = entry.map_or(0, |p| *p);
                    let left = bytes.saturating_sub(passed) as usize;
                    if data.len() >= left {
                        data = &data[..left];
                        close_after = true;
                    }
                    if let Some(e) = self.seen.get_mut(&t.name) {
                        e.2 += data.len() as u64;
                    }
                }
                Effect::Latency { latency, jitter } => {
                    let j = if jitter > 0 { self.rng.random_range(0..=2 * jitter) as i64 - jitter as i64 } else { 0 };
                    let delay = ms(latency.saturating_add_signed(j));
                    let wait = (received + delay).saturating_duration_since(Instant::now());
                    if !self.wait(wait).await {
                        return Err(End::Close);
                    }
                }
                Effect::Bandwidth { rate } if rate > 0 => {
                    let d = Duration::from_micros(data.len() as u64 * 1000 / rate);
                    if !self.wait(d).await {
                        return Err(End::Close);
                    }
                }
                _ => {}
            }
        }
        let slicer = active.iter().find_map(|(t, _)| match t.effect {
            Effect::Slicer { average_size, size_variation, delay } if average_size > 0 => {
                Some((average_size, size_variation, delay))
            }
            _ => None,
        });
        // When the write began: the peer cannot have read any of it before.
        let writing_ns = mono_ns();
        match slicer {
            None => self.write(dst, data).await?,
            Some((avg, var, delay)) => {
                while !data.is_empty() {
                    let v = if var > 0 { self.rng.random_range(0..=2 * var) as i64 - var as i64 } else { 0 };
                    let size = (avg as i64 + v).max(1) as usize;
                    let (now, rest) = data.split_at(size.min(data.len()));
                    self.write(dst, now).await?;
                    data = rest;
                    if !data.is_empty() && !self.wait(Duration::from_micros(delay)).await {
                        return Err(End::Close);
                    }
                }
            }
        }
        if close_after {
            Err(End::Close)
        } else {
            Ok(writing_ns)
        }
    }
}
