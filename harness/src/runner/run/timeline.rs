//! The timeline: every apply, arm, expiry and heal of a run's fault schedule on one clock, in time
//! order (heals first when several fall together), so faults can overlap; a trigger firing adds
//! its heal. It records the schedule as executed (schedule.json, what `leasequake repro` replays)
//! and, when the last fault healed late, lasts until the liveness bound after it.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use leasequake_reports::history::{FaultEvent, FaultPhase, HistoryLine};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::info;

use super::{node_index, resolve_target, Ctx, Fleet, SCHEDULE_FILE};
use crate::clock::mono_ns;
use crate::fault::{self, Applied, Heal, Nodes, World};
use crate::history::write_atomically;
use crate::progress::Progress;
use crate::recorder::Recorder;
use crate::scenario::{Fault, FaultKind, ScheduleStep, Trigger};
use crate::trigger::{Armed, Hit};

/// The kinds of step, in the order they run when they fall on the same millisecond. Triggers are
/// armed before faults are applied: an apply can take seconds (a failover waits for the
/// promotion), and a trigger armed after it would miss the very event it waits for.
const HEAL: u8 = 0;
const EXPIRE: u8 = 1;
const ARM: u8 = 2;
const APPLY: u8 = 3;

pub(super) struct Timeline<'t> {
    ctx: &'t Ctx<'t>,
    world: &'t World<'t>,
    lines: &'t Recorder,
    progress: &'t Progress,
    armed: &'t Mutex<Vec<Armed>>,
    /// (at ms, kind of step, fault index), earliest first.
    steps: BinaryHeap<Reverse<(u64, u8, usize)>>,
    active: fault::Active,
    /// Faults armed and not yet fired or expired.
    waiting: usize,
    executed: Vec<ScheduleStep>,
    /// When the last fault healed: on a loaded machine a heal can land late, and the run then
    /// lasts until the liveness bound after it, so liveness is judged rather than inconclusive.
    last_heal: Option<Instant>,
    t0: Instant,
}

impl<'t> Timeline<'t> {
    pub(super) fn new(
        ctx: &'t Ctx<'t>,
        world: &'t World<'t>,
        lines: &'t Recorder,
        progress: &'t Progress,
        armed: &'t Mutex<Vec<Armed>>,
    ) -> Self {
        let mut steps = BinaryHeap::new();
        for (i, f) in ctx.faults.iter().enumerate() {
            steps.push(Reverse((f.at_ms(), if f.trigger().is_some() { ARM } else { APPLY }, i)));
            if f.trigger().is_none() {
                steps.push(Reverse((f.at_ms() + f.duration_ms(), HEAL, i)));
            }
        }
        Self {
            ctx,
            world,
            lines,
            progress,
            armed,
            steps,
            active: fault::Active::new(ctx.dir),
            waiting: 0,
            executed: Vec::new(),
            last_heal: None,
            t0: Instant::now(),
        }
    }

    fn now_ms(&self) -> u64 {
        self.t0.elapsed().as_millis() as u64
    }

    /// Runs the schedule to its end (or the interrupt), heals what is left, waits out the run,
    /// and writes schedule.json. Returns the faults that could not be healed and how far the run
    /// went past `duration_s`. Bounded: each fault is applied, expired or healed once.
    pub(super) async fn run(
        mut self,
        fleet: &mut Fleet<'_>,
        mut hits: mpsc::Receiver<Hit>,
        cancel: &CancellationToken,
    ) -> (Vec<u64>, Option<u64>) {
        loop {
            let next = self.steps.peek().map(|Reverse((at, _, _))| self.t0 + Duration::from_millis(*at));
            if next.is_none() && self.waiting == 0 {
                break;
            }
            let sleep = async {
                match next {
                    Some(at) => tokio::time::sleep_until(at.into()).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = cancel.cancelled() => break,
                Some((i, node, done)) = hits.recv() => {
                    self.triggered(fleet, i, &node).await;
                    let _ = done.send(());
                }
                () = sleep => {
                    if let Some(Reverse((_, kind, i))) = self.steps.pop() {
                        self.step(fleet, kind, i).await;
                    }
                }
            }
        }
        let still_applied = self.heal_the_rest(fleet).await;
        let extended_ms = self.wait_for_the_end(cancel).await;
        let schedule = serde_json::to_vec_pretty(&self.executed).unwrap_or_default();
        let _ = write_atomically(&self.ctx.dir.join(SCHEDULE_FILE), &schedule);
        (still_applied, extended_ms)
    }

    async fn step(&mut self, fleet: &mut Fleet<'_>, kind: u8, i: usize) {
        let f = &self.ctx.faults[i];
        match (kind, f.trigger()) {
            (HEAL, _) => self.heal(fleet, i).await,
            (EXPIRE, _) => self.expire(i),
            (_, Some(trigger)) => self.arm(i, trigger),
            (_, None) => {
                let target = resolve_target(f, self.world.lease, self.ctx.s.nodes.count);
                self.push(f.id(i), f.kind, &target, FaultPhase::Requested, String::new());
                let label = format!("fault {} {} on {target}", f.id(i), f.kind);
                // Healed at its time even when unverified: part of it may be in effect.
                self.apply(fleet, i, target, label).await;
            }
        }
    }

    /// A trigger fired on `node`: the fault is applied now (the node waits at its sync point),
    /// and healed `duration_s` later.
    async fn triggered(&mut self, fleet: &mut Fleet<'_>, i: usize, node: &str) {
        self.waiting -= 1;
        let f = &self.ctx.faults[i];
        let target = if f.target.is_some() { node.to_owned() } else { fault::untargeted(f.kind).to_owned() };
        let on = f.on.clone().unwrap_or_default();
        self.push(f.id(i), f.kind, &target, FaultPhase::Requested, format!("triggered: {node} {on}"));
        let label = format!("fault {} {} on {target} ({on})", f.id(i), f.kind);
        self.apply(fleet, i, target, label).await;
        self.steps.push(Reverse((self.now_ms() + f.duration_ms(), HEAL, i)));
    }

    async fn apply(&mut self, fleet: &mut Fleet<'_>, i: usize, target: String, label: String) {
        let f = &self.ctx.faults[i];
        let id = f.id(i);
        self.executed.push(ScheduleStep::executed(id, f, &target, self.now_ms()));
        let index = node_index(&target);
        let node = fleet.handle(index);
        let outcome = fault::apply(self.world, id, f, index, node.as_ref()).await;
        match &outcome {
            Ok(detail) => {
                info!(fault = id, node = %target, %detail, "fault verified");
                self.progress.fault(&format!("{label}: verified ({detail})"), true);
            }
            Err(why) => {
                info!(fault = id, node = %target, %why, "fault not verified");
                self.progress.fault(&format!("{label}: NOT VERIFIED ({why})"), false);
            }
        }
        self.lines.push(fault::outcome_line(id, f, &target, &outcome));
        self.active.insert(i, Applied { id, fault: f.clone(), target, index, node });
    }

    async fn heal(&mut self, fleet: &mut Fleet<'_>, i: usize) {
        let Some(a) = self.active.remove(i) else { return };
        let healed = fault::heal(self.world, &a, true, fleet).await;
        let detail = healed.detail();
        // A fault whose effect outlasts its heal ends, for the run's length, when its effect does.
        let outlasts = Duration::from_millis(fault::outlasts_heal_ms(&a.fault).unwrap_or(0));
        self.last_heal = self.last_heal.max(Some(Instant::now() + outlasts));
        info!(fault = a.id, node = %a.target, %detail, "fault healed");
        self.progress.fault(&format!("fault {} {} on {}: healed ({detail})", a.id, a.fault.kind, a.target), false);
        self.record_heal(&a, &healed, detail);
    }

    /// The heal's lines: healed; healed but unsettled (then failed: not the lease's doing, the
    /// verdict cannot stand on this environment); or not healed.
    fn record_heal(&mut self, a: &fault::Applied, healed: &Heal, detail: String) {
        let outlasts_ms = fault::outlasts_heal_ms(&a.fault);
        match healed {
            Heal::Done(_) => self.push_healed(a, detail, outlasts_ms),
            Heal::Unsettled(_) => {
                self.push_healed(a, detail.clone(), outlasts_ms);
                self.push(a.id, a.fault.kind, &a.target, FaultPhase::Failed, detail);
            }
            Heal::Failed(_) => self.push(a.id, a.fault.kind, &a.target, FaultPhase::HealFailed, detail),
        }
    }

    fn arm(&mut self, i: usize, trigger: Trigger) {
        let f = &self.ctx.faults[i];
        let named = f.target.as_deref().filter(|t| *t != "owner").map(str::to_owned);
        self.armed.lock().unwrap_or_else(PoisonError::into_inner).push((i, trigger, named));
        self.waiting += 1;
        self.steps.push(Reverse((self.now_ms() + self.ctx.s.liveness_bound_ms(), EXPIRE, i)));
        let on = f.on.as_deref().unwrap_or("");
        self.progress.fault(&format!("fault {} {} armed: waiting for `{on}`", f.id(i), f.kind), false);
    }

    /// An armed fault whose event did not come within the liveness bound: not verified.
    fn expire(&mut self, i: usize) {
        let still = {
            let mut a = self.armed.lock().unwrap_or_else(PoisonError::into_inner);
            let before = a.len();
            a.retain(|(k, _, _)| *k != i);
            before != a.len()
        };
        if !still {
            return;
        }
        self.waiting -= 1;
        let f: &Fault = &self.ctx.faults[i];
        let (id, bound_ms) = (f.id(i), self.ctx.s.liveness_bound_ms());
        let target = f.target.clone().unwrap_or_else(|| fault::untargeted(f.kind).to_owned());
        let on = f.on.as_deref().unwrap_or("");
        let why = format!("`{on}` did not happen within {bound_ms} ms of at_s {} s", f.at_s);
        self.progress.fault(&format!("fault {id} {} on {target}: NOT VERIFIED ({why})", f.kind), false);
        self.push(id, f.kind, &target, FaultPhase::Requested, String::new());
        self.push(id, f.kind, &target, FaultPhase::Failed, why);
    }

    /// Interrupted, or the schedule ended with faults applied: heal them now. Returns those that
    /// may remain.
    async fn heal_the_rest(&mut self, fleet: &mut Fleet<'_>) -> Vec<u64> {
        let mut still_applied = Vec::new();
        for a in self.active.take_all() {
            let healed = fault::heal(self.world, &a, false, fleet).await;
            if !matches!(healed, Heal::Done(_)) {
                still_applied.push(a.id);
            }
            self.record_heal(&a, &healed, format!("early: {}", healed.detail()));
        }
        still_applied
    }

    /// Waits until the run's end (see [`super::run_end`]); returns how far past `duration_s`.
    async fn wait_for_the_end(&self, cancel: &CancellationToken) -> Option<u64> {
        let planned = self.t0 + Duration::from_secs(self.ctx.s.duration_s);
        let end = super::run_end(planned, self.last_heal, self.ctx.s.liveness_bound_ms());
        let extended_ms = (end > planned).then(|| end.duration_since(planned).as_millis() as u64);
        if let Some(late) = extended_ms {
            info!(extended_ms = late, "a fault healed late; the run lasts until the liveness bound after it");
            self.progress.phase(&format!(
                "the last fault healed late: the run goes on {late} ms past duration_s, to the liveness bound"
            ));
        }
        tokio::select! { () = cancel.cancelled() => {}, () = tokio::time::sleep_until(end.into()) => {} }
        extended_ms
    }

    fn push(&self, id: u64, fault: FaultKind, target: &str, phase: FaultPhase, detail: String) {
        let line = FaultEvent {
            id,
            fault,
            target: target.to_owned(),
            phase,
            at_ns: mono_ns(),
            detail,
            redis_link: None,
            outlasts_ms: None,
        };
        self.lines.push(HistoryLine::Fault(line));
    }

    fn push_healed(&self, a: &fault::Applied, detail: String, outlasts_ms: Option<u64>) {
        let line = FaultEvent {
            id: a.id,
            fault: a.fault.kind,
            target: a.target.clone(),
            phase: FaultPhase::Healed,
            at_ns: mono_ns(),
            detail,
            redis_link: None,
            outlasts_ms,
        };
        self.lines.push(HistoryLine::Fault(line));
    }
}
