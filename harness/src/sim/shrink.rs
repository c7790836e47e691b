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
use crate::scenario::smaller::{self, renumbered};
use crate::scenario::{Fault, Scenario};

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
            while i < smaller::count(smaller::SIM_STEPS, best.0.len()) {
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

    /// The `i`th candidate of a pass (`scenario::smaller`, the simulation's steps), fitting a
    /// file of the seed's virtual length.
    fn candidate(&self, faults: &[Fault], i: usize) -> Option<(Vec<Fault>, String)> {
        let mut file = self.scenario.clone();
        file.duration_s = self.virtual_s;
        smaller::candidate(&file, smaller::SIM_STEPS, faults, i)
    }
}
