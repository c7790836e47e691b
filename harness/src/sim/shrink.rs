//! Shrinking a failing seed's schedule: the seed stays (it decides the world's own randomness:
//! tokens, the lease's jitter), the faults get fewer and shorter, and every step is kept only if
//! the world still violates the same property. Greedy and bounded: remove each fault in turn, then
//! halve each fault's duration, until a pass changes nothing or the budget runs out.

use std::sync::Arc;
use std::time::{Duration, Instant};

use leasequake_reports::PropertyStatus;

use super::world::{run_schedule, SimRun};
use crate::error::HarnessError;
use crate::job::Variant;
use crate::scenario::{Fault, FaultKind, Scenario};

/// How much shrinking may cost.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// Worlds run, at most.
    pub attempts: u32,
    /// Wall time, at most.
    pub wall: Duration,
}

impl Default for Budget {
    fn default() -> Self {
        Self { attempts: 200, wall: Duration::from_secs(120) }
    }
}

/// A fault is not shortened below this (the container lane's probes need some time to verify;
/// `pause_writes` needs 2 s, as scenario files require).
fn shortest_ms(kind: FaultKind) -> u64 {
    if kind == FaultKind::PauseWrites {
        2_000
    } else {
        500
    }
}

/// What one shrinking step tried, for the progress line.
pub struct Step<'a> {
    /// Worlds run so far.
    pub attempt: u32,
    /// What the step tried.
    pub tried: String,
    /// Whether the property was still violated (the step kept).
    pub kept: bool,
    /// The schedule now.
    pub faults: &'a [Fault],
}

/// The smallest schedule found.
pub struct Shrunk {
    /// The faults, renumbered from 1.
    pub faults: Vec<Fault>,
    /// Its world's history and verdict.
    pub run: SimRun,
    /// Worlds run.
    pub attempts: u32,
    /// Whether the budget ended the search (the schedule may shrink further).
    pub budget_spent: bool,
}

/// The search: one scenario, seed and variant; the property every kept step must violate.
pub struct Search<'a> {
    /// The configuration.
    pub scenario: &'a Scenario,
    /// The seed (kept).
    pub seed: u64,
    /// Virtual seconds per world.
    pub virtual_s: u64,
    /// The node variant.
    pub variant: &'a Arc<Variant>,
    /// The property (`no_stale_write`, ...).
    pub property: &'a str,
}

/// Whether `run` violates `property`.
#[must_use]
pub fn violates(run: &SimRun, property: &str) -> bool {
    run.result.properties.iter().any(|p| p.name == property && p.status == PropertyStatus::Violated)
}

impl Search<'_> {
    /// Shrinks `faults` (whose world, `run`, violates the property) within `budget`.
    ///
    /// # Errors
    /// A world cannot be built.
    pub fn shrink(
        &self,
        faults: Vec<Fault>,
        run: SimRun,
        budget: Budget,
        mut progress: impl FnMut(&Step<'_>),
    ) -> Result<Shrunk, HarnessError> {
        let started = Instant::now();
        let mut best = (renumbered(faults), run);
        let mut attempts = 0u32;
        let mut spent = false;
        // Bounded by the budget; each pass that changes nothing ends it.
        'passes: loop {
            let mut changed = false;
            let mut i = 0;
            while i < best.0.len().max(1) * 3 {
                let Some((candidate, tried)) = self.candidate(&best.0, i) else {
                    i += 1;
                    continue;
                };
                if attempts >= budget.attempts || started.elapsed() >= budget.wall {
                    spent = true;
                    break 'passes;
                }
                attempts += 1;
                let world = run_schedule(self.scenario, self.seed, self.virtual_s, candidate.clone(), self.variant)?;
                let kept = violates(&world, self.property);
                progress(&Step { attempt: attempts, tried, kept, faults: if kept { &candidate } else { &best.0 } });
                if kept {
                    best = (renumbered(candidate), world);
                    changed = true;
                } else {
                    i += 1;
                }
            }
            if !changed {
                break;
            }
        }
        Ok(Shrunk { faults: best.0, run: best.1, attempts, budget_spent: spent })
    }

    /// The `i`th candidate of a pass: for `i` below the schedule's length, the schedule without
    /// fault `i`; then fault `i - len` at half its duration (none when it is already short); then
    /// fault `i - 2 len` aimed at `owner` instead of a named node (whoever holds the lease when it
    /// begins: the simplest target, and the one a container run hits however its timing differs).
    fn candidate(&self, faults: &[Fault], i: usize) -> Option<(Vec<Fault>, String)> {
        let n = faults.len();
        if i < n {
            let mut c = faults.to_vec();
            let gone = c.remove(i);
            return Some((c, format!("without {} at {} ms", gone.kind, gone.at_ms())));
        }
        if i >= 2 * n {
            let j = i - 2 * n;
            let f = faults.get(j)?;
            let named = f.target.as_deref().filter(|t| t.starts_with('n') && *t != "non-owner")?.to_owned();
            let mut c = faults.to_vec();
            c[j].target = Some("owner".into());
            return Some((c, format!("{} at {} ms on the owner instead of {named}", f.kind, f.at_ms())));
        }
        let j = i.checked_sub(n)?;
        let f = faults.get(j)?;
        let shorter = halved(f)?;
        // Only what a scenario file may hold (a failover past Sentinel's down-after, ...).
        let mut file = self.scenario.clone();
        file.duration_s = self.virtual_s;
        let short = with_duration(f, shorter);
        crate::scenario::fault_fits(&file, &short).ok()?;
        let mut c = faults.to_vec();
        let tried = format!("{} at {} ms for {} ms instead of {}", f.kind, f.at_ms(), shorter, f.duration_ms());
        c[j] = short;
        Some((c, tried))
    }
}

/// Half of `f`'s duration, rounded up to 100 ms, if that is shorter and not below the shortest.
fn halved(f: &Fault) -> Option<u64> {
    if f.kind == FaultKind::KeyLoss {
        return None;
    }
    let half = (f.duration_ms() / 2).div_ceil(100) * 100;
    (half >= shortest_ms(f.kind) && half < f.duration_ms()).then_some(half)
}

/// `f` lasting `ms`.
fn with_duration(f: &Fault, ms: u64) -> Fault {
    let mut f = f.clone();
    f.exact_ms = Some((f.at_ms(), ms));
    f.duration_s = ms.div_ceil(1000);
    f
}

/// The faults numbered by their place (a shrunk schedule is a schedule of its own).
fn renumbered(faults: Vec<Fault>) -> Vec<Fault> {
    faults
        .into_iter()
        .map(|mut f| {
            f.number = None;
            f
        })
        .collect()
}
