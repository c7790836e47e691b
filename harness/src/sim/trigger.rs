//! Triggered faults in the world, as the container lane's router fires them: a fault with `on`
//! is armed at its time and applied the moment a node reports the event (the named node's, or
//! any node's for `owner` and for faults on Redis or the store, hitting the node that reported
//! it); a node holding at a checkpoint's sync point is let go only once the fault is in. A fault
//! whose event does not come within the liveness bound after it was armed failed (the seed is
//! inconclusive), as on containers. What the observer sees (`key_expired`, `role_changed`) fires
//! nothing here yet: such a fault fails when armed, never applied at a time it did not ask for.

use std::sync::{Arc, PoisonError};
use std::time::Duration;

use leasequake_reports::history::{EventKind, FaultPhase, NodeCommand};
use tokio::sync::mpsc;

use super::world::World;
use crate::scenario::Trigger;

/// A node's event, for the router: the node's index and what it reported.
pub(super) type Seen = (u32, EventKind);

/// How many events may wait for the router (the nodes' recorders wait when it is full).
pub(super) const SEEN_MAX: usize = 4096;

/// Arms fault `i` (its time has come): its event fires it from now on, until the liveness bound.
pub(super) fn arm(w: &Arc<World>, i: usize) {
    let f = &w.faults[i];
    let Some(trigger) = f.trigger() else { return };
    if let Trigger::Observed(_) = trigger {
        let target = f.target.clone().unwrap_or_else(|| crate::fault::untargeted(f.kind).to_owned());
        let why = format!(
            "`{}` is seen by the container lane's observer; the simulation does not fire faults on it yet (docs/sim.md)",
            f.on.as_deref().unwrap_or("")
        );
        w.fail(i, &target, why);
        return;
    }
    let named = f.target.as_deref().filter(|t| *t != "owner").map(str::to_owned);
    w.armed().push((i, trigger, named));
}

/// The liveness bound after fault `i` was armed: if its event never came, it failed.
pub(super) fn expire(w: &Arc<World>, i: usize) {
    let still = {
        let mut armed = w.armed();
        let before = armed.len();
        armed.retain(|(k, _, _)| *k != i);
        before != armed.len()
    };
    if still {
        let f = &w.faults[i];
        let target = f.target.clone().unwrap_or_else(|| crate::fault::untargeted(f.kind).to_owned());
        let why = format!(
            "`{}` did not happen within {} ms of at_s {} s",
            f.on.as_deref().unwrap_or(""),
            w.liveness_bound_ms(),
            f.at_s
        );
        w.fail(i, &target, why);
    }
}

/// The router: every fault armed for a node's event is applied (and its heal scheduled) before
/// that node, holding at a sync point, is let go. Bounded by the world, which aborts it at the
/// end.
pub(super) async fn route(w: Arc<World>, mut seen: mpsc::Receiver<Seen>) {
    while let Some((index, kind)) = seen.recv().await {
        let node = format!("n{index}");
        let fired: Vec<usize> = {
            let mut armed = w.armed();
            let hit = |(_, t, named): &(usize, Trigger, Option<String>)| {
                t.fired_by(&kind) && named.as_deref().is_none_or(|n| n == node)
            };
            let fired = armed.iter().filter(|a| hit(a)).map(|(i, _, _)| *i).collect();
            armed.retain(|a| !hit(a));
            fired
        };
        for i in fired {
            if let Some(applied) = w.apply_fault(i, index) {
                let ms = w.faults[i].duration_ms();
                let world = w.clone();
                let heal = tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    world.heal_fault(i, applied);
                });
                w.heals().push(heal.abort_handle());
            }
        }
        if let EventKind::SyncPoint { number, .. } = kind {
            if let Some(n) = w.node(index) {
                let _ = n.command(NodeCommand::Go { checkpoint: number });
            }
        }
    }
}

impl World {
    /// Records fault `i` as requested and failed, with why.
    fn fail(&self, i: usize, target: &str, why: String) {
        let f = &self.faults[i];
        let id = f.id(i);
        self.record(super::world::fault_line(self, id, f, target, FaultPhase::Requested, String::new()));
        self.record(crate::fault::outcome_line_at(id, f, target, &Err(why), self.clock.now_ns()));
    }

    fn armed(&self) -> std::sync::MutexGuard<'_, Vec<crate::trigger::Armed>> {
        self.armed.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn heals(&self) -> std::sync::MutexGuard<'_, Vec<tokio::task::AbortHandle>> {
        self.heals.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
