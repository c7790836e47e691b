//! A simulated schedule as a scenario file for real containers: the configuration of the file the
//! seed ran (its comments aside), the schedule as `[[faults]]` to the ms, the seed, and what the
//! run must show: a finding of the correct lease is a plain scenario the correct lease must pass
//! (its finding recorded as the origin: a failure there is a defect to fix), or, when the user says
//! the configuration is to blame (`--as-hazard`), an expected failure; a flawed lease's finding is
//! a self-test scenario, which the correct node must pass and the flawed one fail. The text is
//! parsed back before it is written.

use std::path::Path;

use super::seeds::Request;
use super::shrink::{violates, Budget, Search};
use super::world::{run_schedule, schedule, SimRun};
use crate::error::HarnessError;
use crate::exit::Exit;
use crate::scenario::{Fault, NAME_MAX};
use leasequake_reports::history::{EventKind, FaultPhase, HistoryLine};

/// What the exported scenario is for.
pub struct Origin<'a> {
    /// The scenario file the seed ran.
    pub file: &'a Path,
    /// The seed.
    pub seed: u64,
    /// Virtual seconds the seed ran (the export's `duration_s`).
    pub virtual_s: u64,
    /// The property the schedule violates.
    pub property: &'a str,
    /// The lease flaw that ran, if any.
    pub flaw: Option<&'a str>,
    /// Worlds run to shrink it (0: not shrunk).
    pub attempts: u32,
    /// The node count the seed ran with (`--nodes` may have changed the file's).
    pub nodes: u32,
    /// The day of the export, `YYYY-MM-DD` (the `[origin]`'s `found`).
    pub found: &'a str,
    /// The user declared the correct lease's finding a hazard of the configuration
    /// (`--as-hazard`): written with `[expected]`.
    pub hazard: bool,
}

/// The scenario text for `faults` run as `origin` says, checked by parsing it back.
///
/// # Errors
/// The scenario file cannot be read, or the export does not parse (a defect: the text names it).
pub fn scenario_text(origin: &Origin<'_>, faults: &[Fault]) -> Result<String, HarnessError> {
    let bad = |detail: String| HarnessError::usage(format!("exporting seed {}: {detail}", origin.seed));
    let text =
        std::fs::read_to_string(origin.file).map_err(|e| bad(format!("cannot read {}: {e}", origin.file.display())))?;
    let mut table: toml::Table = toml::from_str(&text).map_err(|e| bad(e.to_string()))?;
    for key in ["faults", "random", "expected", "seed", "origin", "sim"] {
        table.remove(key);
    }
    // A flaw's finding is named after the flaw (two flaws' findings on one seed stay apart).
    let base = match origin.flaw {
        Some(flaw) => flaw.to_owned(),
        None => table.get("name").and_then(toml::Value::as_str).unwrap_or("sim").to_owned(),
    };
    let mut name = format!("{base}-seed-{}", origin.seed);
    name.truncate(NAME_MAX);
    let what = origin.flaw.map_or_else(|| "the correct lease".to_owned(), |f| format!("the lease flaw {f}"));
    let shrunk = if origin.attempts > 0 {
        format!(", shrunk in {} simulated runs to the smallest schedule that still violates it", origin.attempts)
    } else {
        String::new()
    };
    table.insert("name".into(), name.into());
    if let Some(nodes) = table.get_mut("nodes").and_then(toml::Value::as_table_mut) {
        nodes.insert("count".into(), toml::Value::Integer(i64::from(origin.nodes)));
    }
    table.insert(
        "description".into(),
        format!(
            "leasequake sim seed {} of {}: {what} violates {}",
            origin.seed,
            origin.file.display(),
            origin.property
        )
        .into(),
    );
    table.insert("incident".into(), incident(origin, &what, &shrunk).into());
    table.insert("seed".into(), toml::Value::Integer(i64::try_from(origin.seed).map_err(|e| bad(e.to_string()))?));
    table.insert("duration_s".into(), toml::Value::Integer(i64::try_from(origin.virtual_s).unwrap_or(i64::MAX)));
    if origin.flaw.is_none() && origin.hazard {
        let mut expected = toml::Table::new();
        expected.insert("property".into(), origin.property.into());
        expected.insert(
            "why".into(),
            format!(
                "the correct lease violated it in the simulation (seed {}): a hazard of the configuration",
                origin.seed
            )
            .into(),
        );
        table.insert("expected".into(), expected.into());
    }
    table.insert("origin".into(), origin_table(origin).map_err(bad)?.into());
    table.insert("faults".into(), crate::scenario::file::faults_value(faults).map_err(bad)?);
    crate::scenario::file::text(table).map_err(bad)
}

/// The `[origin]` table: where the scenario came from (docs/scenarios.md).
fn origin_table(origin: &Origin<'_>) -> Result<toml::Table, String> {
    let o = crate::scenario::origin::Origin {
        source: crate::scenario::origin::Source::Sim,
        found: origin.found.to_owned(),
        property: origin.property.to_owned(),
        flaw: origin.flaw.map(str::to_owned),
        scenario: Some(origin.file.display().to_string()),
        seed: Some(origin.seed),
        shrink_runs: origin.attempts,
    };
    toml::Table::try_from(o).map_err(|e| e.to_string())
}

fn incident(origin: &Origin<'_>, what: &str, shrunk: &str) -> String {
    let judge = match origin.flaw {
        Some(flaw) => format!("Self-test: exposes {flaw} ({}); the correct node must pass it.", origin.property),
        None if origin.hazard => {
            format!("Expected to fail {} with the correct lease too: see [expected].", origin.property)
        }
        None => format!(
            "The correct lease must pass it: a FAIL of {} is a defect of the lease or of the checker to fix, \
             or, if the configuration is to blame, export it again with --as-hazard to declare it.",
            origin.property
        ),
    };
    format!(
        "Exported by `leasequake sim --seed {} --scenario {} --export` from a simulated run in which {what} \
         violated {}{shrunk}. The faults keep the simulation's times to the ms; a fault that began right after an event of its node waits for that event (`on`). {judge}",
        origin.seed,
        origin.file.display(),
        origin.property
    )
}

/// `leasequake sim --seed S --export FILE`: runs the seed, shrinks its schedule (unless asked not
/// to), writes the scenario, and checks that the written file, run in the simulation with the same
/// seed, violates the same property.
///
/// # Errors
/// The scenario cannot be read, a world cannot be built, or the file cannot be written.
pub fn run(req: &Request, s: &crate::scenario::Scenario, file: &Path) -> Result<Exit, HarnessError> {
    // The lease's own warnings are the history's to tell, dozens of worlds over: not the terminal's.
    let _quiet = tracing::subscriber::set_default(tracing::subscriber::NoSubscriber::default());
    let seed = req.first;
    let faults = schedule(s, seed, req.virtual_s);
    let run = run_schedule(s, seed, req.virtual_s, faults.clone(), &req.variant)?;
    let Some(property) = violated(&run) else {
        let verdict = format!("{:?}", run.result.verdict).to_uppercase();
        return Err(HarnessError::usage(format!(
            "seed {seed} gives {verdict}, not FAIL: nothing to export (export a seed a batch reported as FAIL)"
        )));
    };
    println!("seed {seed} violates {property} with {} faults", faults.len());
    let search = Search { scenario: s, seed, virtual_s: req.virtual_s, variant: &req.variant, property: &property };
    let (faults, attempts) = if req.shrink {
        let shrunk = search.shrink(faults, run, Budget::default(), |step| {
            let outcome = if step.kept { "still violates it" } else { "does not" };
            println!("  shrink {:>3}: {}: {outcome} ({} faults)", step.attempt, step.tried, step.faults.len());
        })?;
        if shrunk.budget_spent {
            println!("  the budget ended the search: the schedule may shrink further");
        }
        (shrunk.faults, shrunk.attempts)
    } else {
        (faults, 0)
    };
    let virtual_s = shortest_run(&search, &faults)?;
    if virtual_s < req.virtual_s {
        println!("  cut to {virtual_s} s (the liveness bound after the last heal): still violates it");
    }
    let cut = Search { virtual_s, ..search };
    let faults = with_triggers(&cut, faults)?;
    let held = robustness(&cut, &faults)?;
    println!(
        "  the schedule violates {property} on {held} of {ROBUST_SEEDS} seeds of the world (its own randomness varied: \
         owner tokens, retry jitter){}",
        if held < ROBUST_SEEDS { "; a container run, whose timing varies more, may miss it" } else { "" }
    );
    let origin = Origin {
        file: &req.scenario,
        seed,
        virtual_s,
        property: &property,
        flaw: req.flaw.as_deref(),
        attempts,
        nodes: s.nodes.count,
        found: &crate::report::today(),
        hazard: req.hazard,
    };
    let text = scenario_text(&origin, &faults)?;
    crate::history::write_atomically(file, text.as_bytes())?;
    let exported = crate::scenario::load(file).map_err(|e| HarnessError::usage(e.to_string()))?;
    let again = run_schedule(&exported, seed, virtual_s, schedule(&exported, seed, virtual_s), &req.variant)?;
    let total_ms: u64 = faults.iter().map(Fault::duration_ms).sum();
    println!("wrote {} ({} faults, {total_ms} ms of faults in all)", file.display(), faults.len());
    if !violates(&again, &property) {
        println!("but run again from the file, the simulation does not violate {property}: the export lost something");
        return Ok(Exit::Inconclusive);
    }
    let file_arg = file.display().to_string();
    let mut sim = vec!["sim".to_owned(), "--seed".into(), seed.to_string(), "--scenario".into(), file_arg.clone()];
    sim.extend(["--virtual-s".to_owned(), virtual_s.to_string()]);
    if let Some(f) = &req.flaw {
        sim.extend(["--flaw".to_owned(), f.clone()]);
    }
    println!("checked: `{}` violates {property}", crate::command_line::command(sim));
    // The flawed build runs no containers: the checkout's harness does.
    let run = |extra: &[&str]| {
        let words =
            ["run", file_arg.as_str()].into_iter().chain(extra.iter().copied()).map(crate::command_line::quoted);
        std::iter::once(crate::command_line::harness_program().to_owned()).chain(words).collect::<Vec<_>>().join(" ")
    };
    match req.flaw.as_deref() {
        Some(f) => {
            let node = format!("target/flawed/debug/leasequake node --flaw {f}");
            println!("on containers, the flawed node (expect FAIL): {}", run(&["--node-cmd", &node]));
            println!("on containers, the correct node (expect PASS): {}", run(&[]));
        }
        None => println!("on containers (expect XFAIL): {}", run(&[])),
    }
    Ok(Exit::Failed)
}

/// The shortest run that still shows the finding, s: the liveness bound (and 2 s) after the last
/// heal, when the same seed and schedule run that long still violate the property (a container
/// run of the export then takes no longer than it must); else the search's own length.
fn shortest_run(search: &Search<'_>, faults: &[Fault]) -> Result<u64, HarnessError> {
    // A triggered fault may fire up to a liveness bound after it was armed.
    let bound = search.scenario.liveness_bound_ms();
    let waits = |f: &Fault| if f.on.is_some() { bound } else { 0 };
    let healed_ms =
        faults.iter().map(|f| f.at_ms().saturating_add(waits(f)).saturating_add(f.duration_ms())).max().unwrap_or(0);
    let needed_ms = healed_ms.saturating_add(search.scenario.liveness_bound_ms()).saturating_add(2_000);
    let short_s = needed_ms.div_ceil(1000).max(10);
    if short_s >= search.virtual_s {
        return Ok(search.virtual_s);
    }
    let run = run_schedule(search.scenario, search.seed, short_s, faults.to_vec(), search.variant)?;
    Ok(if violates(&run, search.property) { short_s } else { search.virtual_s })
}

/// How close after a node's event a fault must begin to be tried as triggered by it, ms.
const TRIGGER_WINDOW_MS: u64 = 50;

/// How long before its event a triggered fault is armed, tried longest first: a container run's
/// nodes start a second or two later than the world's, so a fault armed early waits for the same
/// step of the pipeline whenever it comes (0: armed right at the event).
const TRIGGER_LEADS_MS: [u64; 3] = [2_000, 500, 0];

/// The trigger name of a node event a fault can follow (`checkpoint-7`, `acquired`, ...).
fn trigger_name(kind: &EventKind) -> Option<String> {
    let name = match kind {
        EventKind::CheckpointPassed { number, .. } => format!("checkpoint-{number}"),
        EventKind::AcquireAttempt => "acquire_attempt".into(),
        EventKind::Acquired { .. } => "acquired".into(),
        EventKind::Renewed { .. } => "renewed".into(),
        EventKind::OwnershipLost { .. } => "ownership_lost".into(),
        EventKind::RoundAborted { .. } => "round_aborted".into(),
        EventKind::Released { .. } => "released".into(),
        EventKind::SyncFinished { .. } => "sync_finished".into(),
        EventKind::StoreCallSent { op, .. } => format!("store_call_sent:{}", serde_json::to_value(op).ok()?.as_str()?),
        EventKind::ModelCall { batch, .. } => format!("model_call:{batch}"),
        _ => return None,
    };
    crate::scenario::Trigger::parse(&name).map(|_| name)
}

/// The node event fault `j` of `faults` began within [`TRIGGER_WINDOW_MS`] after, on the node it
/// hit, in `run`: (the event's trigger name, its time in ms from the world's start).
fn event_before(run: &SimRun, faults: &[Fault], j: usize) -> Option<(String, u64)> {
    let f = faults.get(j)?;
    let id = f.id(j);
    let applied = run.lines.iter().find_map(|l| match l {
        HistoryLine::Fault(e) if e.id == id && e.phase == FaultPhase::Verified && e.target.starts_with('n') => Some(e),
        _ => None,
    })?;
    // The world's clock at its start: the fault was applied exactly at its time.
    let start_ns = applied.at_ns.checked_sub(f.at_ms().checked_mul(1_000_000)?)?;
    let from_ns = applied.at_ns.saturating_sub(TRIGGER_WINDOW_MS * 1_000_000);
    run.lines
        .iter()
        .rev()
        .filter_map(|l| match l {
            HistoryLine::Node { node, received_ns, event, .. }
                if *node == applied.target && (from_ns..=applied.at_ns).contains(received_ns) =>
            {
                Some((trigger_name(&event.kind)?, (received_ns - start_ns) / 1_000_000))
            }
            _ => None,
        })
        .next()
}

/// The schedule with each fault that began right after an event of its node triggered by that
/// event instead, where the triggered schedule still violates the property and on at least as
/// many world seeds (a container run's timing differs from the world's; the pipeline's steps
/// keep their order). Says what it tried.
fn with_triggers(search: &Search<'_>, faults: Vec<Fault>) -> Result<Vec<Fault>, HarnessError> {
    let mut best = faults;
    let mut held = robustness(search, &best)?;
    let mut file = search.scenario.clone();
    file.duration_s = search.virtual_s;
    for j in 0..best.len() {
        let run = run_schedule(search.scenario, search.seed, search.virtual_s, best.clone(), search.variant)?;
        let Some((on, event_ms)) = event_before(&run, &best, j) else { continue };
        for lead in TRIGGER_LEADS_MS {
            let mut c = best.clone();
            // Armed on a whole second, as a scenario file arms it.
            let arm_ms = (event_ms.saturating_sub(lead) / 1000 * 1000).max(1_000);
            c[j].on = Some(on.clone());
            c[j].exact_ms = Some((arm_ms, c[j].duration_ms()));
            c[j].at_s = arm_ms / 1000;
            if crate::scenario::fault_fits(&file, &c[j]).is_err() {
                continue;
            }
            let again = run_schedule(search.scenario, search.seed, search.virtual_s, c.clone(), search.variant)?;
            if !violates(&again, search.property) {
                continue;
            }
            let h = robustness(search, &c)?;
            let kept = h >= held;
            println!(
                "  {} at {} ms began {} ms after `{on}` of its node: triggered by it (armed at {arm_ms} ms), it \
                 violates {} on {h} of {ROBUST_SEEDS} world seeds (by time: {held}){}",
                best[j].kind,
                best[j].at_ms(),
                best[j].at_ms().saturating_sub(event_ms),
                search.property,
                if kept { ": kept" } else { ": not kept" }
            );
            if kept {
                best = c;
                held = h;
            }
            break;
        }
    }
    Ok(best)
}

/// How many worlds [`robustness`] runs the schedule in.
const ROBUST_SEEDS: u32 = 5;

/// Of [`ROBUST_SEEDS`] worlds (the seed and four others: the world's own randomness, the same
/// schedule), how many violate the property: a schedule that fails only at one world's exact
/// timing is unlikely to fail on containers.
fn robustness(search: &Search<'_>, faults: &[Fault]) -> Result<u32, HarnessError> {
    let mut held = 0;
    for k in 0..u64::from(ROBUST_SEEDS) {
        let seed = search.seed.wrapping_add(k.wrapping_mul(7_919));
        let run = run_schedule(search.scenario, seed, search.virtual_s, faults.to_vec(), search.variant)?;
        held += u32::from(violates(&run, search.property));
    }
    Ok(held)
}

/// The first property `run` violates.
fn violated(run: &SimRun) -> Option<String> {
    run.result
        .properties
        .iter()
        .find(|p| p.status == leasequake_reports::PropertyStatus::Violated)
        .map(|p| p.name.clone())
}
