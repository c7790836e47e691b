//! The container lane's fault vocabulary (`FaultKind`, `scenario::Fault`) applied in the world.
//! Each fault takes effect when applied; the world is its own probe, so the verified line says
//! what was set. A fault the simulation cannot apply yet is a failed fault: the seed is then
//! inconclusive, never judged on a world that was not what its schedule said.

use std::time::Duration;

use leasequake_reports::history::FaultKind;
use tokio::time::Instant;

use super::net::LinkFaults;
use super::world::World;
use crate::scenario::{Fault, Link, Mode};

/// How long a restarting primary refuses connections (the container lane's restarts took
/// 0.8 to 1.5 s).
const RESTART_DOWN: Duration = Duration::from_millis(800);

/// Applies `f` to node `index` (when it targets one); says what was set.
pub(super) fn apply(w: &World, f: &Fault, index: u32) -> Result<String, String> {
    let until = Instant::now() + Duration::from_millis(f.duration_ms());
    let node = || w.node(index).ok_or_else(|| format!("no node n{index}"));
    match f.kind {
        FaultKind::Partition => {
            let n = node()?;
            let link = f.link.unwrap_or(Link::Both);
            let cut = |l: &mut LinkFaults| match f.mode {
                Some(Mode::Blackhole) => l.blackhole_until = Some(until),
                _ => l.reset_until = Some(until),
            };
            if matches!(link, Link::Redis | Link::Both) {
                n.redis_link.set(cut);
            }
            if matches!(link, Link::Store | Link::Both) {
                n.store_link.set(cut);
            }
            Ok(format!("sim: n{index}'s {link:?} link {:?}", f.mode.unwrap_or(Mode::Reset)).to_lowercase())
        }
        FaultKind::Pause => {
            node()?.node_gate.shut_until(until);
            Ok(format!("sim: every task of n{index} held (SIGSTOP)"))
        }
        FaultKind::StallRenewal => {
            node()?.renewal_gate.shut_until(until);
            Ok(format!("sim: n{index}'s renewal task held"))
        }
        FaultKind::Crash => {
            w.crash(index)?;
            Ok(format!("sim: n{index} killed (every task ended; requests already sent still arrive)"))
        }
        FaultKind::SlowModel => {
            let ms = f.latency_ms.unwrap_or(0);
            node()?.command(leasequake_reports::history::NodeCommand::SlowModel { ms })?;
            Ok(format!("sim: n{index}'s model calls {ms} ms slower"))
        }
        FaultKind::SlowStore | FaultKind::FailingStore => {
            let extra = Duration::from_millis(f.latency_ms.unwrap_or(0));
            for n in w.nodes() {
                n.store_link.set(|l| match f.kind {
                    FaultKind::SlowStore => l.slow = Some((extra, until)),
                    _ => l.reset_until = Some(until),
                });
            }
            Ok(format!(
                "sim: the store {} for every node",
                if f.kind == FaultKind::SlowStore { "slow" } else { "failing" }
            ))
        }
        FaultKind::SlowRedis if f.command.is_some() => {
            let (extra, key) = (Duration::from_millis(f.latency_ms.unwrap_or(0)), w.lease_key());
            let aimed = f.command.unwrap_or(crate::scenario::Aimed::Lease);
            node()?.redis_link.set(|l| l.slow_aimed = Some((key, aimed, extra, until)));
            Ok(format!("sim: n{index}'s {} requests {} ms slower", aimed.as_str(), extra.as_millis()))
        }
        FaultKind::SlowRedis => {
            let extra = Duration::from_millis(f.latency_ms.unwrap_or(0));
            node()?.redis_link.set(|l| l.slow = Some((extra, until)));
            Ok(format!("sim: n{index}'s Redis link {} ms slower each way", extra.as_millis()))
        }
        FaultKind::LoseReplies => match f.command {
            Some(aimed) => {
                let key = w.lease_key();
                node()?.redis_link.set(|l| l.lose_next = Some((key, aimed, until)));
                Ok(format!("sim: the reply to n{index}'s next {} lost (the command runs)", aimed.as_str()))
            }
            None => {
                node()?.redis_link.set(|l| l.lose_replies_until = Some(until));
                Ok(format!("sim: n{index}'s Redis replies lost (commands run)"))
            }
        },
        FaultKind::KeyLoss => {
            w.primary_exec(&["DEL", &w.lease_key()]);
            Ok("sim: the lease key deleted on the primary".into())
        }
        FaultKind::RedisRestart => {
            w.restart_primary(Instant::now() + RESTART_DOWN);
            Ok("sim: the primary restarted without persistence (keys, counters, scripts gone)".into())
        }
        FaultKind::PauseWrites => {
            *lock(&w.primary().writes_paused_until) = Some(until);
            Ok("sim: the primary's writes paused".into())
        }
        FaultKind::ClockJump if f.target.is_none() => {
            let jump = f.jump_ms.unwrap_or(0);
            *lock(&w.primary().offset_ms) += jump;
            Ok(format!("sim: the primary's clock moved {jump} ms"))
        }
        FaultKind::Failover => failover(w, f, until),
        FaultKind::ClockJump => Err(format!("the simulation does not model {} on a node yet (docs/sim.md)", f.kind)),
    }
}

/// Undoes what outlasts its window: a crashed node starts again (a new incarnation); a primary's
/// clock steps back; a failed-over primary comes back; a slowed model is told its speed again.
/// Everything else ends by itself at its instant. An error is a heal that failed (a `heal_failed` line: the seed is inconclusive).
pub(super) fn heal(w: &World, f: &Fault, index: u32) -> Result<String, String> {
    match f.kind {
        FaultKind::Crash => match w.restart(index) {
            Ok(incarnation) => Ok(format!("sim: n{index} started again (incarnation {incarnation})")),
            Err(e) => Err(format!("sim: n{index} could not start again: {e}")),
        },
        FaultKind::ClockJump => {
            let jump = f.jump_ms.unwrap_or(0);
            *lock(&w.primary().offset_ms) -= jump;
            Ok("sim: the primary's clock moved back".into())
        }
        FaultKind::Failover => Ok(heal_failover(w, f)),
        // The node keeps its model latency until told otherwise (a new incarnation starts at 0).
        FaultKind::SlowModel => match w.node(index) {
            Some(n) => n
                .command(leasequake_reports::history::NodeCommand::SlowModel { ms: 0 })
                .map(|()| format!("sim: n{index}'s model calls at their own speed again")),
            None => Err(format!("sim: no node n{index}")),
        },
        _ => Ok("sim: ended at its time".into()),
    }
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// How long Sentinel takes from agreeing the primary is down to the promotion.
const ELECTION: Duration = Duration::from_millis(1_000);
/// How long a handover (`SENTINEL FAILOVER`) takes to promote.
const HANDOVER: Duration = Duration::from_millis(500);

/// `failover`: the primary frozen (`pause`, the default), cut from replication (`isolate`), or
/// handed over (`manual`); Sentinel promotes the replica after down-after and an election (a
/// handover at once, with nothing lost). What the stream still carried is lost; clients follow the
/// promotion. A frozen or cut primary healed before the promotion was only a blip.
fn failover(w: &World, f: &Fault, until: Instant) -> Result<String, String> {
    let old = w.primary();
    let mode = f.mode.unwrap_or(Mode::Pause);
    let after = match mode {
        Mode::Manual => HANDOVER,
        _ => Duration::from_millis(w.down_after_ms()) + ELECTION,
    };
    match mode {
        Mode::Manual => {}
        Mode::Isolate => w.redis.set_cut(true),
        _ => {
            *lock(&old.frozen_until) = Some(until);
            w.redis.set_cut(true);
        }
    }
    let (redis, epoch) = (w.redis.clone(), w.redis.epoch());
    let promote_at = Instant::now() + after;
    drop(tokio::spawn(async move {
        tokio::time::sleep_until(promote_at).await;
        // Healed first (the primary came back before Sentinel agreed): no failover.
        if redis.epoch() != epoch || (mode != Mode::Manual && Instant::now() >= until) {
            return;
        }
        redis.promote(mode == Mode::Manual);
        if mode == Mode::Manual {
            redis.demote();
        }
    }));
    Ok(format!(
        "sim: {} {}; Sentinel promotes {} after {} ms",
        old.name,
        match mode {
            Mode::Manual => "handed over",
            Mode::Isolate => "cut from replication",
            _ => "frozen (SIGSTOP)",
        },
        w.redis.servers().iter().find(|s| s.name != old.name).map_or("the replica", |s| s.name),
        after.as_millis()
    ))
}

/// The old primary back: unfrozen and reconnected; if it was replaced, demoted and resynchronised.
fn heal_failover(w: &World, f: &Fault) -> String {
    let mode = f.mode.unwrap_or(Mode::Pause);
    for s in w.redis.servers() {
        *lock(&s.frozen_until) = None;
    }
    if mode == Mode::Manual {
        return "sim: nothing to undo (the handover demoted the old primary)".into();
    }
    let replaced = w.redis.servers().iter().all(|s| s.role() == super::redis::Role::Primary);
    w.redis.set_cut(false);
    if replaced {
        w.redis.demote();
        "sim: the old primary is back, demoted to a replica and resynchronised".into()
    } else {
        "sim: the primary is back (no promotion happened)".into()
    }
}
