//! Faults on node processes: `pause` (SIGSTOP), `crash` (SIGKILL, then a new incarnation),
//! `stall_renewal` and `slow_model` (asked of the node through the protocol), and a node's wall
//! clock stepped (`clock_jump` with a target, through the preloaded clock shim).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use leasequake_reports::history::{EventKind, NodeCommand};
use rustix::process::Signal;
use tokio::sync::broadcast;

use super::{unix_ms, Applied, Heal, Nodes, World};
use crate::holders::Holder;
use crate::procfs;
use crate::scenario::Fault;
use crate::supervisor::NodeHandle;

/// Node `i`'s clock offset file in run directory `dir` (the clock shim's, see harness/clockshim).
pub(crate) fn clock_file(dir: &Path, i: u32) -> PathBuf {
    dir.join("clock").join(format!("n{i}-offset-ms"))
}

pub(super) fn heal_pause(nodes: &dyn Nodes, a: &Applied) -> Heal {
    match nodes.handle(a.index) {
        Some(n) => match n.signal(Signal::CONT) {
            Ok(()) => Heal::done("SIGCONT"),
            Err(_) if gone(n.pid()) => Heal::Done(died(&a.target, n.pid(), "paused")),
            Err(e) => Heal::Failed(format!("SIGCONT failed: {e}")),
        },
        None => Heal::done("no such node"),
    }
}

/// Whether process `pid` is no more (or a zombie): a crash fault killed it.
fn gone(pid: i32) -> bool {
    matches!(procfs::state(pid), None | Some('Z' | 'X'))
}

/// What a heal says of a fault whose process died under it (an overlapping crash): its effect
/// went with the process, and the incarnation the crash's heal starts begins without it.
fn died(node: &str, pid: i32, what: &str) -> String {
    format!("{node}'s {what} process {pid} is gone (crashed while the fault was in effect): nothing to undo; a restarted incarnation starts without it")
}

pub(super) fn heal_crash(nodes: &mut dyn Nodes, a: &Applied) -> Heal {
    match nodes.restart(a.index) {
        Ok(incarnation) => Heal::Done(format!("restarted as incarnation {incarnation}")),
        Err(e) => Heal::Failed(format!("restart failed: {e}")),
    }
}

pub(super) fn heal_slow_model(nodes: &dyn Nodes, a: &Applied) -> Heal {
    match nodes.handle(a.index) {
        Some(n) => match n.send(NodeCommand::SlowModel { ms: 0 }) {
            Ok(()) => Heal::done("model speed restored"),
            Err(_) if gone(n.pid()) => Heal::Done(died(&a.target, n.pid(), "slowed")),
            Err(e) => Heal::Failed(format!("restoring the model speed failed: {e}")),
        },
        None => Heal::done("no such node"),
    }
}

pub(super) fn heal_node_clock(w: &World<'_>, a: &Applied) -> Heal {
    let file = clock_file(w.dir, a.index);
    match write_clock_offset(&file, 0) {
        Ok(()) => Heal::Done(format!("{}'s wall clock set back to the host's", a.target)),
        Err(e) => {
            Heal::Failed(format!("setting {}'s clock back failed: cannot write {}: {e}", a.target, file.display()))
        }
    }
}

/// `pause`: SIGSTOP, verified in /proc.
pub(super) async fn pause(node: Option<&NodeHandle>) -> Result<String, String> {
    let n = node.ok_or("no such node")?;
    n.signal(Signal::STOP).map_err(|e| e.to_string())?;
    let after = stopped(n.pid()).await?;
    Ok(format!("SIGSTOP; /proc/{}/stat state T after {} µs", n.pid(), after.as_micros()))
}

/// The probe of a pause: signal delivery is asynchronous, so this waits (at most 500 ms) for the
/// kernel to stop process `pid` (state T in /proc); returns how long that took.
pub(crate) async fn stopped(pid: i32) -> Result<Duration, String> {
    let sent = Instant::now();
    for _ in 0..50 {
        if procfs::state(pid) == Some('T') {
            return Ok(sent.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Err(format!("SIGSTOP sent, but the process state is {:?}, not T, after 500 ms", procfs::state(pid)))
}

/// `crash`: SIGKILL, verified gone.
pub(super) async fn crash(node: Option<&NodeHandle>) -> Result<String, String> {
    let n = node.ok_or("no such node")?;
    n.signal(Signal::KILL).map_err(|e| e.to_string())?;
    for _ in 0..50 {
        if matches!(procfs::state(n.pid()), None | Some('Z')) {
            return Ok(format!("SIGKILL; process {} gone", n.pid()));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Err("SIGKILL sent, but the process is still running".into())
}

/// `stall_renewal`: the node's renewal stops, verified from Redis itself.
pub(super) async fn stall_renewal(w: &World<'_>, f: &Fault, node: Option<&NodeHandle>) -> Result<String, String> {
    let n = node.ok_or("no such node")?;
    n.send(NodeCommand::StallRenewal { ms: f.duration_ms() }).map_err(|e| e.to_string())?;
    verify_stalled(w, n.node()).await
}

/// Verifies a stalled renewal from Redis itself: if `node` holds the key, its remaining ttl must
/// fall below what renewals every `renew_ms` would keep (ttl - 1.5 renewal intervals), or the key
/// must leave it. A node that holds nothing has no renewal to observe: that is said, not hidden.
async fn verify_stalled(w: &World<'_>, node: &str) -> Result<String, String> {
    // A lock that renews on its own schedule, out of the node's reach: the key's PTTL says nothing
    // of a stall (python-redis-lock renews every 2/3 of its expiry, so its key falls below the
    // floor between renewals), and the node declared it cannot stall it.
    if let Some(hidden) = w.lease.hidden_renewals(Some(node)) {
        return Err(format!("stall_renewal cannot take effect: {hidden}"));
    }
    let (ttl, renew) = (w.s.lease.ttl_ms, w.s.renew_ms());
    let floor = ttl.saturating_sub(renew * 3 / 2);
    let key = w.lease.key();
    let began = Instant::now();
    let mut last = String::new();
    // The lease seen first: a node whose stalled lease expired may acquire a new one at once
    // (same node, new token); on a loaded machine the samples can miss the gap between them.
    let mut stalled: Option<String> = None;
    // Bounded: one ttl plus a second.
    while began.elapsed() < Duration::from_millis(ttl + 1000) {
        // GET and PTTL in one exec, so both describe the same moment.
        let out = w
            .env
            .redis_cli_batch("redis-primary", &format!("GET {key}\nPTTL {key}\n"))
            .await
            .map_err(|e| e.to_string())?;
        let mut replies = out.lines().map(str::trim);
        let holder = replies.next().unwrap_or("");
        unrecognised(w, holder).await?;
        let same = stalled.as_deref().is_none_or(|s| s == holder);
        if !w.lease.held_by(holder, node) || !same {
            let holder = if holder.is_empty() { "nobody" } else { holder };
            return Ok(if stalled.is_none() {
                format!(
                    "stall_renewal delivered; {node} does not hold the lease (holder: {holder}), so no renewal to stop"
                )
            } else {
                format!("the key left {node} {} ms after the stall (holder now: {holder})", began.elapsed().as_millis())
            });
        }
        stalled.get_or_insert_with(|| holder.to_owned());
        let pttl: i64 = replies.next().and_then(|t| t.parse().ok()).unwrap_or(-2);
        if pttl >= 0 && (pttl as u64) < floor {
            return Ok(format!(
                "{node}'s key was not renewed: PTTL {pttl} ms < {floor} ms, {} ms after the stall",
                began.elapsed().as_millis()
            ));
        }
        last = format!("PTTL {pttl} ms");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    Err(format!("{node} still renews its lease {} ms after the stall ({last})", began.elapsed().as_millis()))
}

/// A lease key holding a value that is none of the run's nodes' tokens: whose it is cannot be
/// told, so whether the fault reached the owner cannot either. Said, never read as "nobody". A
/// node's `acquired` reaches the harness a moment after its SET: an unknown value is looked up
/// again for up to half a second before it counts as unrecognised.
async fn unrecognised(w: &World<'_>, holder: &str) -> Result<(), String> {
    for _ in 0..20 {
        if !matches!(w.lease.holder(holder), Holder::Unknown(_)) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    Err(format!(
        "the lease key {} holds {:?}, which is no token a node of the run reported (`acquired`, or a `node/` prefix \
         under protocols 1 and 2: docs/node-protocol.md): the harness cannot tell whether the fault reached the owner",
        w.lease.key(),
        leasequake_reports::printable(holder)
    ))
}

/// `slow_model`: the node's model calls take longer, verified by its next one.
pub(super) async fn slow_model(w: &World<'_>, f: &Fault, node: Option<&NodeHandle>) -> Result<String, String> {
    let n = node.ok_or("no such node")?;
    let extra = f.latency_ms.unwrap_or(0);
    let mut events = w.events.subscribe();
    n.send(NodeCommand::SlowModel { ms: extra }).map_err(|e| e.to_string())?;
    let normal = w.s.pipeline.embed_ms;
    // The probe: the node's next model call takes at least the added time. Bounded: a
    // node that makes no model call (it does not hold the lease) fails the verification.
    let limit = Duration::from_millis(extra + normal + 2 * w.s.lease.ttl_ms + 2000);
    let wait = async {
        loop {
            match events.recv().await {
                Ok(r) if r.node == n.node() => {
                    if let Ok(ev) = &r.line {
                        if let EventKind::ModelCall { ms, .. } = ev.kind {
                            if ms >= normal + extra {
                                return Ok(format!("{}'s next model call took {ms} ms (normally {normal})", n.node()));
                            }
                        }
                    }
                }
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => return Err("the node's events ended".to_owned()),
            }
        }
    };
    if let Ok(outcome) = tokio::time::timeout(limit, wait).await {
        return outcome;
    }
    // Only the owner calls the model. A node that lost the lease (another fault took it)
    // has no model call to slow: said as such, as for a stalled renewal; a node that holds
    // the lease and made no slow call is a fault that did not take effect.
    let key = w.lease.key();
    let holder = w.env.redis_cli("redis-primary", &["GET", &key]).await.unwrap_or_default();
    let holder = holder.trim();
    unrecognised(w, holder).await?;
    if w.lease.held_by(holder, n.node()) {
        return Err(format!(
            "{} holds the lease but made no model call of {} ms or more within {} ms",
            n.node(),
            normal + extra,
            limit.as_millis()
        ));
    }
    Ok(format!(
        "slow_model delivered; {} made no model call within {} ms and does not hold the lease (holder: {}), so no model call to slow",
        n.node(),
        limit.as_millis(),
        if holder.is_empty() { "nobody" } else { holder }
    ))
}

/// Writes a clock offset file in place, 64 bytes, never truncating it: the shim reads it through a
/// shared mapping at any moment, and a file that shrank under the mapping would fault.
pub(crate) fn write_clock_offset(file: &Path, offset_ms: i64) -> std::io::Result<()> {
    use std::io::Write;
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let text = format!("{:<64}", format!("{offset_ms:+}"));
    let mut f = std::fs::OpenOptions::new().create(true).write(true).truncate(false).open(file)?;
    f.write_all(text.as_bytes())
}

/// `clock_jump` on a node: moves its wall clock (CLOCK_REALTIME; monotonic clocks untouched, as
/// NTP steps do) through the preloaded shim. Verified twice: the shim is mapped in the node's
/// process (a static binary ignores the preload: not verifiable), and `date` under the same shim
/// and file reads the jump.
pub(super) async fn node_clock(
    w: &World<'_>,
    f: &Fault,
    index: u32,
    node: Option<&NodeHandle>,
) -> Result<String, String> {
    let n = node.ok_or("no such node")?;
    let jump = f.jump_ms.unwrap_or(0);
    let file = clock_file(w.dir, index);
    let shim = crate::image::clock_shim().map_err(|e| e.to_string())?;
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", n.pid())).unwrap_or_default();
    let shim_name = shim.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    if !maps.contains(&shim_name) {
        return Err(format!(
            "{}'s process (pid {}) does not load the clock shim (a static binary, or one that clears LD_PRELOAD): its wall clock cannot be moved",
            n.node(),
            n.pid()
        ));
    }
    write_clock_offset(&file, jump).map_err(|e| format!("cannot write {}: {e}", file.display()))?;
    let seen = probe_shim_clock(&shim, &file).await?;
    if (seen - jump).abs() > 1000 {
        return Err(format!("asked for a {jump:+} ms jump, but `date` under the shim is {seen:+} ms off the host's"));
    }
    Ok(format!(
        "{}'s wall clock moved {jump:+} ms: the shim is mapped in pid {}, and `date` under it is {seen:+} ms off the host's (monotonic clocks untouched)",
        n.node(),
        n.pid()
    ))
}

/// How far `date` under the clock shim, reading `file`, is from the host's clock, ms.
async fn probe_shim_clock(shim: &Path, file: &Path) -> Result<i64, String> {
    let before = unix_ms();
    let out = tokio::time::timeout(
        Duration::from_secs(5),
        tokio::process::Command::new("date")
            .arg("+%s%3N")
            .env("LD_PRELOAD", shim)
            .env("LEASEQUAKE_CLOCK_FILE", file)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .map_err(|_| "`date` under the shim did not answer within 5 s".to_owned())?
    .map_err(|e| format!("cannot run `date` under the shim: {e}"))?;
    let after = unix_ms();
    let text = String::from_utf8_lossy(&out.stdout);
    let ms: i64 = text.trim().parse().map_err(|_| format!("`date` under the shim printed `{}`", text.trim()))?;
    Ok(ms - (before + after) / 2)
}
