//! The observer: who holds the lease key on each Redis instance, and its role, every 250 ms,
//! through `docker exec` (a path that survives cut links and failovers); one loop per instance,
//! so a frozen one (a stopped process answers nothing) does not stop the other's samples. Each
//! sample is a history line; what a sample shows against the previous one (a key that ran out
//! under its holder, a role that changed) is handed to the triggers.

use std::time::Duration;

use leasequake_reports::history::{HistoryLine, ObserverSample};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::clock::mono_ns;
use crate::env::Environment;
use crate::holders::{Holder, Holders};
use crate::scenario::Observed;
use crate::watch::Push;

/// How often each instance is sampled.
const EVERY: Duration = Duration::from_millis(250);

/// Samples both instances until `stop`, pushing each sample and sending what it shows to `seen`
/// (a full queue drops a sighting: a trigger then waits for the next).
pub async fn observe(
    env: &Environment,
    lease: &Holders,
    push: Push<'_>,
    seen: mpsc::Sender<Observed>,
    stop: &CancellationToken,
) {
    tokio::join!(
        instance(env, "redis-primary", lease, push, seen.clone(), stop),
        instance(env, "redis-replica", lease, push, seen, stop)
    );
}

async fn instance(
    env: &Environment,
    instance: &'static str,
    lease: &Holders,
    push: Push<'_>,
    seen: mpsc::Sender<Observed>,
    stop: &CancellationToken,
) {
    // The previous good sample, with when its exec began (its GET ran after that).
    let mut prev: Option<(ObserverSample, u64)> = None;
    // Bounded by the run (stop).
    while !stop.is_cancelled() {
        let began_ns = mono_ns();
        // The key is read anew each time: the nodes' `hello` may declare another.
        let sample = sample(env, instance, &lease.key()).await;
        if sample.error.is_none() {
            for sighting in observed(prev.as_ref().map(|(p, b)| (p, *b)), &sample, lease) {
                let _ = seen.try_send(sighting);
            }
            prev = Some((sample.clone(), began_ns));
        }
        push(HistoryLine::Observer(sample));
        tokio::select! {
            () = stop.cancelled() => {}
            () = tokio::time::sleep(EVERY) => {}
        }
    }
}

/// One exec per sample (GET, PTTL, ROLE in one redis-cli), stamped when it has answered: the
/// holder was seen at or before then.
async fn sample(env: &Environment, instance: &'static str, key: &str) -> ObserverSample {
    let asked_ns = Some(mono_ns());
    let out = env.redis_cli_batch(instance, &format!("GET {key}\nPTTL {key}\nROLE\n")).await;
    let at_ns = mono_ns();
    let text = out.map_err(|e| e.to_string());
    let replies: Vec<&str> = text.as_deref().map(|t| t.lines().map(str::trim).collect()).unwrap_or_default();
    let role = replies.get(2).filter(|r| matches!(**r, "master" | "slave")).map(|r| (*r).to_owned());
    match (&text, role) {
        (Ok(_), Some(role)) => ObserverSample {
            instance: instance.into(),
            at_ns,
            holder: replies.first().map(|h| (*h).to_owned()).filter(|h| !h.is_empty()),
            ttl_ms: replies.get(1).and_then(|t| t.parse().ok()),
            role: Some(role),
            error: None,
            asked_ns,
        },
        (answer, _) => ObserverSample {
            instance: instance.into(),
            at_ns,
            holder: None,
            ttl_ms: None,
            role: None,
            error: Some(match answer {
                Ok(t) => format!("unexpected answer: {}", t.lines().next().unwrap_or("")),
                Err(e) => e.clone(),
            }),
            asked_ns,
        },
    }
}

/// What a new observer sample shows against the instance's previous one (with when that one's
/// exec began): the primary's key ran out under its holder, or the instance's role changed. Ran
/// out: now gone or another's, and answered at or after the earliest moment the previous PTTL
/// allows for the run-out (its GET ran after its exec began: exec start + PTTL). Samples are
/// hundreds of ms apart and an exec takes up to hundreds on a loaded machine, so the clock
/// readings decide, not a threshold; a lease that releases at its own deadline, a few ms before
/// its key would run out, counts as expired too. A release a renewal interval early does not. A
/// key whose value is no node's token (`lease`) is no sighting: whose lease ran out is unknown.
pub(crate) fn observed(prev: Option<(&ObserverSample, u64)>, now: &ObserverSample, lease: &Holders) -> Vec<Observed> {
    let Some((prev, prev_began_ns)) = prev else { return Vec::new() };
    let mut seen = Vec::new();
    if now.instance == "redis-primary" {
        if let (Some(held), Some(ttl)) = (&prev.holder, prev.ttl_ms.and_then(|t| u64::try_from(t).ok())) {
            let runs_out_ns = prev_began_ns.saturating_add(ttl.saturating_mul(1_000_000));
            if runs_out_ns <= now.at_ns && now.holder.as_ref() != Some(held) {
                if let Holder::Node(node) = lease.holder(held) {
                    seen.push(Observed::KeyExpired { node });
                }
            }
        }
    }
    if prev.role.is_some() && now.role.is_some() && prev.role != now.role {
        seen.push(Observed::RoleChanged { instance: now.instance.clone(), role: now.role.clone().unwrap_or_default() });
    }
    seen
}
