//! Smaller schedules: the candidates a shrink tries, one at a time, for a schedule that fails. The
//! simulation's shrink and the container lane's (`leasequake shrink`) walk the same candidates;
//! each keeps a candidate only if it still violates the same property. A candidate is always a
//! schedule a scenario file may hold (`fault_fits`), so whatever a shrink ends with can be written
//! out and run on containers.

use super::{fault_fits, Fault, FaultKind, Scenario};

/// A kind of step towards a smaller schedule, in the order a pass tries them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Without a run of neighbouring faults (half of them, then a quarter, ... down to two):
    /// delta debugging's big steps first, for long schedules.
    RemoveChunk,
    /// Without one fault.
    Remove,
    /// One fault at half its duration (rounded up to 100 ms; never below the shortest a probe
    /// can verify).
    Halve,
    /// One fault aimed at `owner` instead of a named node: the simplest target, and the one a run
    /// hits however its timing differs.
    AimAtOwner,
    /// One fault begun at half its time (not before the first second), so the run needs less
    /// of what came before it.
    Earlier,
}

/// The steps the simulation tries (its figures in docs/detection.md were measured with these).
pub const SIM_STEPS: &[Step] = &[Step::Remove, Step::Halve, Step::AimAtOwner];

/// The steps a shrink on containers tries: each attempt costs a run, so big removals first.
pub const CONTAINER_STEPS: &[Step] = &[Step::RemoveChunk, Step::Remove, Step::Halve, Step::AimAtOwner, Step::Earlier];

/// A fault is not shortened below this (the container lane's probes need some time to verify;
/// `pause_writes` needs 2 s, as scenario files require).
fn shortest_ms(kind: FaultKind) -> u64 {
    if kind == FaultKind::PauseWrites {
        2_000
    } else {
        500
    }
}

/// How many candidates one pass over `n` faults has (`candidate`'s indices run below it).
#[must_use]
pub fn count(steps: &[Step], n: usize) -> usize {
    steps.len().saturating_mul(n.max(1))
}

/// The `i`th candidate of a pass over `faults` with `steps`: step `i / n` applied to fault (or
/// chunk) `i % n`, with what it tried in words; `None` where that step does not apply (a fault
/// already short, a target already the owner, a chunk size that does not exist). `file` is the
/// scenario the schedule runs in (what a fault must fit).
#[must_use]
pub fn candidate(file: &Scenario, steps: &[Step], faults: &[Fault], i: usize) -> Option<(Vec<Fault>, String)> {
    let n = faults.len().max(1);
    let step = *steps.get(i / n)?;
    let j = i % n;
    match step {
        Step::RemoveChunk => without_chunk(faults, j),
        Step::Remove => {
            let mut c = faults.to_vec();
            (j < c.len()).then_some(())?;
            let gone = c.remove(j);
            Some((c, format!("without {} at {} ms", gone.kind, gone.at_ms())))
        }
        Step::Halve => {
            let f = faults.get(j)?;
            let shorter = halved(f)?;
            changed(file, faults, j, with_times(f, f.at_ms(), shorter), || {
                format!("{} at {} ms for {} ms instead of {}", f.kind, f.at_ms(), shorter, f.duration_ms())
            })
        }
        Step::AimAtOwner => {
            let f = faults.get(j)?;
            let named = f.target.as_deref().filter(|t| t.starts_with('n') && *t != "non-owner")?.to_owned();
            let mut c = faults.to_vec();
            c[j].target = Some("owner".into());
            Some((c, format!("{} at {} ms on the owner instead of {named}", f.kind, f.at_ms())))
        }
        Step::Earlier => {
            let f = faults.get(j)?;
            let at = (f.at_ms() / 2).div_ceil(100) * 100;
            (at >= 1_000 && at < f.at_ms()).then_some(())?;
            changed(file, faults, j, with_times(f, at, f.duration_ms()), || {
                format!("{} at {at} ms instead of {} ms", f.kind, f.at_ms())
            })
        }
    }
}

/// `faults` with fault `j` replaced by `new`, if a scenario file may hold it.
fn changed(
    file: &Scenario,
    faults: &[Fault],
    j: usize,
    new: Fault,
    tried: impl FnOnce() -> String,
) -> Option<(Vec<Fault>, String)> {
    fault_fits(file, &new).ok()?;
    let mut c = faults.to_vec();
    c[j] = new;
    Some((c, tried()))
}

/// The `j`th chunk removal: chunk sizes n/2, n/4, ... down to 2, each size's chunks in order,
/// numbered on from 0. `None` past the last.
fn without_chunk(faults: &[Fault], mut j: usize) -> Option<(Vec<Fault>, String)> {
    let n = faults.len();
    let mut size = n / 2;
    while size >= 2 {
        let chunks = n.div_ceil(size);
        if j < chunks {
            let from = j * size;
            let to = (from + size).min(n);
            let mut c = faults.to_vec();
            let gone: Vec<String> = c.drain(from..to).map(|f| format!("{} at {} ms", f.kind, f.at_ms())).collect();
            return Some((c, format!("without {} faults ({})", gone.len(), gone.join(", "))));
        }
        j -= chunks;
        size /= 2;
    }
    None
}

/// Half of `f`'s duration, rounded up to 100 ms, if that is shorter and not below the shortest.
fn halved(f: &Fault) -> Option<u64> {
    if f.kind == FaultKind::KeyLoss {
        return None;
    }
    let half = (f.duration_ms() / 2).div_ceil(100) * 100;
    (half >= shortest_ms(f.kind) && half < f.duration_ms()).then_some(half)
}

/// `f` beginning at `at_ms` and lasting `ms`.
fn with_times(f: &Fault, at_ms: u64, ms: u64) -> Fault {
    let mut f = f.clone();
    f.exact_ms = Some((at_ms, ms));
    f.at_s = at_ms / 1000;
    f.duration_s = ms.div_ceil(1000);
    f
}

/// The faults numbered by their place (a shrunk schedule is a schedule of its own).
#[must_use]
pub fn renumbered(faults: Vec<Fault>) -> Vec<Fault> {
    faults
        .into_iter()
        .map(|mut f| {
            f.number = None;
            f
        })
        .collect()
}
