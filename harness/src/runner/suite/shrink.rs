//! `leasequake shrink RUN_DIR`: a failing container run's recorded schedule made smaller on real
//! containers, for nodes the simulation cannot run (any language, `--node-cmd`). The recorded
//! schedule is first run again (`--confirm` times): a failure that does not come back every time
//! is reported as flaky, with its rate, and not shrunk into noise. Then delta debugging over
//! `repro`: candidates from `scenario::smaller` (chunks of faults removed, single faults removed,
//! halved, aimed at the owner, begun earlier), each run once on containers, kept when the run
//! fails the same property. Every attempt is a run of one suite directory (its report lists them
//! all); the smallest failing schedule is written as `shrunk.toml` beside them, with `shrink.json`
//! listing the attempts. The search stops at its budget, on Ctrl-C, or when a pass keeps nothing.

use std::path::Path;
use std::time::{Duration, Instant};

use leasequake_reports::suite::ScenarioRun;
use leasequake_reports::{PropertyStatus, Verdict};
use serde::Serialize;

use super::repro::{recorded, Recorded};
use super::{interrupt_on_signal_or_after, run_one, usable_report_dir};
use crate::error::HarnessError;
use crate::exit::Exit;
use crate::report::SuiteDir;
use crate::run::{Interrupt, RunOptions};
use crate::scenario::smaller::{self, renumbered, CONTAINER_STEPS};
use crate::scenario::{Fault, Scenario};

/// What a confirming attempt says it tried.
const CONFIRMING: &str = "the recorded schedule, again";

/// What `leasequake shrink` was asked to do.
#[derive(Debug)]
pub struct Request {
    /// The failing run, where the shrink's suite goes, and the node command (as for repro).
    pub run: super::repro::Request,
    /// Wall time for the whole search; no attempt starts that would likely end past it.
    pub budget: Duration,
    /// Runs of the recorded schedule before shrinking (0: trust the recorded failure).
    pub confirm: u32,
}

/// One run of the search, for shrink.json and the terminal.
#[derive(Debug, Clone, Serialize)]
struct Attempt {
    /// 1, 2, ...
    number: u32,
    /// What it tried (`the recorded schedule`, `without partition at 12000 ms`, ...).
    tried: String,
    /// Faults in the schedule it ran.
    faults: usize,
    /// The run's verdict (`FAIL`, `PASS`, `INCONCLUSIVE`).
    verdict: String,
    /// Whether it violated the property (the step kept).
    violated: bool,
    /// Its run directory, in the suite directory.
    dir: String,
    /// Wall seconds.
    took_s: f64,
}

/// What shrink.json holds.
#[derive(Debug, Serialize)]
struct Summary<'a> {
    /// The run shrunk.
    from: String,
    /// The property every kept attempt violated.
    property: &'a str,
    /// `shrunk`, `not shrunk: ...`, `flaky`, `interrupted`.
    outcome: String,
    /// Faults recorded, faults left.
    faults_before: usize,
    faults_after: usize,
    /// The recorded schedule's failures over its runs (the recorded run included).
    reproduced: (u32, u32),
    attempts: &'a [Attempt],
}

/// The search's state: the suite it writes into and what it has learnt.
struct Search {
    suite: SuiteDir,
    rec: Recorded,
    base: toml::Table,
    opts: RunOptions,
    interrupt: Interrupt,
    property: String,
    started: Instant,
    budget: Duration,
    attempts: Vec<Attempt>,
    longest: Duration,
    /// The run directory (in the suite) of the smallest failing schedule so far.
    best_dir: Option<String>,
}

/// Shrinks the failing run in `req.run.dir`.
///
/// # Errors
/// The directory holds no failing run, or the report directory cannot be written.
pub async fn run(req: Request) -> Result<Exit, HarnessError> {
    let (dir, report_dir) = (req.run.dir, req.run.report_dir);
    let rec = recorded(&dir, req.run.node_cmd, req.run.run_recorded_command, "shrink")?;
    let property = failed_property(&dir)?;
    usable_report_dir(&report_dir)?;
    let base = base_table(&dir)?;
    let opts = RunOptions {
        seed: Some(rec.seed),
        node_cmd: rec.node_cmd.clone(),
        attach: None,
        progress: crate::progress::Progress::stderr(),
    };
    println!(
        "shrinking {} ({} faults, seed {}): it violated {property}; budget {}",
        dir.display(),
        rec.scenario.faults.len(),
        rec.seed,
        minutes(req.budget)
    );
    let mut s = Search {
        suite: SuiteDir::create(&report_dir)?,
        rec,
        base,
        opts,
        interrupt: interrupt_on_signal_or_after(None),
        property,
        started: Instant::now(),
        budget: req.budget,
        attempts: Vec::new(),
        longest: Duration::ZERO,
        best_dir: None,
    };
    let faults = s.rec.scenario.faults.clone();
    let reproduced = s.confirm(&faults, req.confirm).await?;
    if reproduced.0 < reproduced.1 || (req.confirm > 0 && reproduced.1 == 1) {
        return s.not_shrunk(&dir, reproduced);
    }
    let (best, outcome) = s.search(faults).await?;
    s.finish(&dir, &best, reproduced, &outcome)
}

/// The first property the run in `dir` violated, judged again from its history (its
/// verdicts.json could say anything); a run that did not fail is nothing to shrink.
fn failed_property(dir: &Path) -> Result<String, HarnessError> {
    let result = crate::history::judge_dir(dir)?;
    let violated = result.properties.iter().find(|p| p.status == PropertyStatus::Violated);
    match (result.verdict, violated) {
        (Verdict::Inconclusive, _) => Err(HarnessError::usage(format!(
            "{} is INCONCLUSIVE ({}): a violation on a run that cannot be trusted is nothing to shrink; \
             run it again with `{}`",
            dir.display(),
            result.inconclusive.first().map_or("no reason recorded", String::as_str),
            crate::command_line::command(["repro", &dir.display().to_string()])
        ))),
        (_, Some(p)) => Ok(p.name.clone()),
        (_, None) => Err(HarnessError::usage(format!(
            "{} violated no property (its verdict is {}): nothing to shrink; give a failing run's directory",
            dir.display(),
            format!("{:?}", result.verdict).to_uppercase()
        ))),
    }
}

/// The run's scenario file as a table, without what a shrink replaces (its faults, its draw,
/// its seed and origin) and without a node command (a file never names what runs: the command
/// line does).
fn base_table(dir: &Path) -> Result<toml::Table, HarnessError> {
    let file = dir.join("scenario.toml");
    let bad = |e: String| HarnessError::usage(format!("{}: {e}", file.display()));
    let text = std::fs::read_to_string(&file).map_err(|e| bad(e.to_string()))?;
    let mut table: toml::Table = toml::from_str(&text).map_err(|e| bad(e.to_string()))?;
    for key in ["faults", "random", "seed", "origin"] {
        table.remove(key);
    }
    if let Some(nodes) = table.get_mut("nodes").and_then(toml::Value::as_table_mut) {
        nodes.remove("command");
    }
    Ok(table)
}

impl Search {
    /// The scenario text and scenario for `faults`, or why the schedule is no valid scenario.
    /// The seed goes in the file when TOML can hold it (to i64::MAX); the runs get it anyway.
    fn scenario(&self, faults: &[Fault], origin: Option<toml::Table>) -> Result<(String, Scenario), String> {
        let mut table = self.base.clone();
        table.insert("faults".into(), crate::scenario::file::faults_value(faults)?);
        if let Ok(seed) = i64::try_from(self.rec.seed) {
            table.insert("seed".into(), toml::Value::Integer(seed));
        }
        let duration = i64::try_from(self.rec.scenario.duration_s).map_err(|e| e.to_string())?;
        table.insert("duration_s".into(), toml::Value::Integer(duration));
        if let Some(o) = origin {
            table.insert("origin".into(), o.into());
        }
        let text = crate::scenario::file::text(table)?;
        let s = crate::scenario::parse(Path::new("shrunk.toml"), &text).map_err(|e| e.to_string())?;
        Ok((text, s))
    }

    /// Runs `faults` once on containers; `None` when it is no valid scenario.
    async fn attempt(&mut self, faults: &[Fault], tried: &str) -> Result<Option<Attempt>, HarnessError> {
        let (text, sc) = match self.scenario(faults, None) {
            Ok(x) => x,
            Err(why) => {
                println!("  skipped: {tried}: no valid scenario ({why})");
                return Ok(None);
            }
        };
        let number = u32::try_from(self.attempts.len() + 1).unwrap_or(u32::MAX);
        let file = self.suite.dir().join(format!("attempt-{number:02}.toml"));
        crate::history::write_atomically(&file, text.as_bytes())?;
        let label = format!("[shrink {number}] {tried}");
        let began = Instant::now();
        let run = run_one(&mut self.suite, &file, &sc, self.rec.seed, &self.opts, &self.interrupt, &label).await;
        self.longest = self.longest.max(began.elapsed());
        let a = Attempt {
            number,
            tried: tried.to_owned(),
            faults: faults.len(),
            verdict: format!("{:?}", run.verdict()).to_uppercase(),
            violated: self.violates(&run),
            dir: run.dir.clone(),
            took_s: run.took_s,
        };
        // A confirming run keeps nothing: it measures whether the failure comes back.
        let kept = if tried.starts_with(CONFIRMING) { "" } else { ": kept" };
        let outcome = if a.violated { format!("violates {}{kept}", self.property) } else { "does not".to_owned() };
        println!(
            "  attempt {number:>2} ({}): {tried}: {} {outcome} ({} faults)  [{}]",
            minutes(self.started.elapsed()),
            a.verdict,
            a.faults,
            self.suite.dir().join(&a.dir).display()
        );
        self.attempts.push(a.clone());
        Ok(Some(a))
    }

    /// Whether `run` violated the property on a run that can be trusted (not inconclusive).
    fn violates(&self, run: &ScenarioRun) -> bool {
        let Some(r) = &run.result else { return false };
        r.verdict != Verdict::Inconclusive
            && r.properties.iter().any(|p| p.name == self.property && p.status == PropertyStatus::Violated)
    }

    /// Whether another attempt may start: the budget would likely not be passed by it, and no
    /// one interrupted.
    fn may_start(&self) -> bool {
        !self.interrupt.fired() && self.started.elapsed() + self.longest <= self.budget
    }

    /// Runs the recorded schedule `runs` times: (failures, runs), the recorded run counted.
    async fn confirm(&mut self, faults: &[Fault], runs: u32) -> Result<(u32, u32), HarnessError> {
        let mut seen = (1, 1);
        for k in 1..=runs {
            if !self.may_start() {
                break;
            }
            let tried = format!("{CONFIRMING} ({k} of {runs})");
            // An inconclusive run is no evidence either way (a drifted environment, an interrupt).
            if let Some(a) = self.attempt(faults, &tried).await?.filter(|a| a.verdict != "INCONCLUSIVE") {
                seen.1 += 1;
                seen.0 += u32::from(a.violated);
                if a.violated {
                    self.best_dir = Some(a.dir);
                }
            }
        }
        Ok(seen)
    }

    /// Passes over the candidates until a pass keeps nothing, the budget is spent, or an
    /// interrupt: the smallest failing schedule and how the search ended.
    async fn search(&mut self, faults: Vec<Fault>) -> Result<(Vec<Fault>, String), HarnessError> {
        let mut best = renumbered(faults);
        let file = self.rec.scenario.clone();
        loop {
            let mut changed = false;
            let mut i = 0;
            while i < smaller::count(CONTAINER_STEPS, best.len()) {
                let Some((candidate, tried)) = smaller::candidate(&file, CONTAINER_STEPS, &best, i) else {
                    i += 1;
                    continue;
                };
                if !self.may_start() {
                    let why = if self.interrupt.fired() { "interrupted" } else { "the budget ended the search" };
                    return Ok((best, why.to_owned()));
                }
                match self.attempt(&candidate, &tried).await? {
                    Some(a) if a.violated => {
                        best = renumbered(candidate);
                        self.best_dir = Some(a.dir);
                        changed = true;
                    }
                    _ => i += 1,
                }
            }
            if !changed {
                return Ok((best, "no smaller schedule fails".to_owned()));
            }
        }
    }
}

impl Search {
    /// The recorded failure did not come back every time (or no run of it could be judged): a
    /// shrink would chase noise. Says so with the rate, and ends inconclusive.
    fn not_shrunk(mut self, from: &Path, (failed, runs): (u32, u32)) -> Result<Exit, HarnessError> {
        let outcome = if runs == 1 {
            println!(
                "not shrunk: no run of the recorded schedule could be judged (each was INCONCLUSIVE: see the report)"
            );
            "not shrunk: every confirming run was inconclusive".to_owned()
        } else {
            println!(
                "flaky: the recorded schedule violated {} in {failed} of {runs} runs ({}%; the recorded run \
                 counted): not shrunk, since a shrink would chase noise. Raise --confirm to measure the rate, \
                 or shrink a failure that comes back every time",
                self.property,
                u64::from(failed) * 100 / u64::from(runs)
            );
            format!("flaky: failed {failed} of {runs} runs")
        };
        self.write_summary(from, &outcome, (failed, runs), self.rec.scenario.faults.len())?;
        let page = self.suite.finish(None)?;
        println!("report: {}", page.display());
        Ok(Exit::Inconclusive)
    }

    /// Writes the smallest failing schedule (`shrunk.toml`, with its `[origin]`), shrink.json and
    /// the suite's report, and says what it found.
    fn finish(
        mut self,
        from: &Path,
        best: &[Fault],
        reproduced: (u32, u32),
        outcome: &str,
    ) -> Result<Exit, HarnessError> {
        let runs = u32::try_from(self.attempts.len()).unwrap_or(u32::MAX);
        let origin = origin_table(from, &self.property, self.rec.seed, runs)?;
        let (text, _) = self.scenario(best, Some(origin)).map_err(|why| {
            HarnessError::usage(format!(
                "the smallest schedule of {} is no valid scenario (a defect): {why}",
                from.display()
            ))
        })?;
        let file = self.suite.dir().join("shrunk.toml");
        crate::history::write_atomically(&file, text.as_bytes())?;
        self.write_summary(from, outcome, reproduced, best.len())?;
        let interrupted = self.interrupt.fired();
        let page = self.suite.finish(interrupted.then(|| "interrupted (Ctrl-C or SIGTERM)".to_owned()))?;
        let total_ms: u64 = best.iter().map(Fault::duration_ms).sum();
        let kept = self.attempts.iter().filter(|a| a.violated).count();
        println!(
            "{outcome}: {} faults ({total_ms} ms of faults in all), from {}; {} attempts in {} ({kept} violated {})",
            best.len(),
            self.rec.scenario.faults.len(),
            self.attempts.len(),
            minutes(self.started.elapsed()),
            self.property
        );
        for f in best {
            println!(
                "  {} on {} at {} ms for {} ms",
                f.kind,
                f.target.as_deref().unwrap_or("-"),
                f.at_ms(),
                f.duration_ms()
            );
        }
        let shown = self.best_dir.as_ref().map_or_else(|| from.to_path_buf(), |d| self.suite.dir().join(d));
        println!("wrote {}; its run: {}", file.display(), shown.display());
        let mut args =
            vec!["run".to_owned(), file.display().to_string(), "--seed".to_owned(), self.rec.seed.to_string()];
        if let Some(c) = &self.opts.node_cmd {
            args.extend(["--node-cmd".to_owned(), c.join(" ")]);
        }
        println!("run it: {}", crate::command_line::command(args));
        println!("report: {}", page.display());
        Ok(if interrupted { Exit::Inconclusive } else { Exit::Failed })
    }

    fn write_summary(
        &self,
        from: &Path,
        outcome: &str,
        reproduced: (u32, u32),
        after: usize,
    ) -> Result<(), HarnessError> {
        let summary = Summary {
            from: from.display().to_string(),
            property: &self.property,
            outcome: outcome.to_owned(),
            faults_before: self.rec.scenario.faults.len(),
            faults_after: after,
            reproduced,
            attempts: &self.attempts,
        };
        let path = self.suite.dir().join("shrink.json");
        let json = serde_json::to_vec_pretty(&summary)
            .map_err(|e| HarnessError::History { path: path.clone(), detail: e.to_string() })?;
        crate::history::write_atomically(&path, &json)
    }
}

/// The `[origin]` of a shrunk container run (docs/scenarios.md).
fn origin_table(from: &Path, property: &str, seed: u64, runs: u32) -> Result<toml::Table, HarnessError> {
    let o = crate::scenario::origin::Origin {
        source: crate::scenario::origin::Source::Run,
        found: crate::report::today(),
        property: property.to_owned(),
        flaw: None,
        scenario: Some(from.join("scenario.toml").display().to_string()),
        // TOML holds integers to i64::MAX; a larger seed is printed on the `run it:` line instead.
        seed: i64::try_from(seed).is_ok().then_some(seed),
        shrink_runs: runs,
    };
    toml::Table::try_from(o).map_err(|e| HarnessError::usage(format!("writing the origin: {e}")))
}

/// `d` as `12m05s`.
fn minutes(d: Duration) -> String {
    let s = d.as_secs();
    format!("{}m{:02}s", s / 60, s % 60)
}
