//! `leasequake sim`: many seeds over one scenario's configuration, split across worker threads,
//! each seed's history judged in memory; failing seeds (and one passing sample) kept as run
//! directories of a suite, with the command that replays each. Ctrl-C stops between seeds with
//! the counts so far.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Instant;

use leasequake_reports::history::HistoryLine;
use leasequake_reports::suite::ScenarioRun;
use leasequake_reports::{escaped, Verdict};
use sha2::{Digest, Sha256};

use super::world::{run_seed, SimRun};
use crate::error::HarnessError;
use crate::exit::Exit;
use crate::report::SuiteDir;
use crate::scenario::Scenario;

/// What `leasequake sim` was asked to do.
#[derive(Clone)]
pub struct Request {
    /// The scenario whose configuration (nodes, lease, pipeline, store) every seed runs.
    pub scenario: PathBuf,
    /// The seeds: `first..first + count`.
    pub first: u64,
    /// How many.
    pub count: u64,
    /// Virtual seconds per seed.
    pub virtual_s: u64,
    /// The node count, instead of the scenario's (`--nodes`).
    pub nodes: Option<u32>,
    /// Worker threads.
    pub workers: usize,
    /// Where kept seeds go.
    pub report_dir: PathBuf,
    /// The node variant (the reference node, or a lease flaw in the self-test build).
    pub variant: Arc<crate::job::Variant>,
    /// The flaw's name, for the replay command.
    pub flaw: Option<String>,
    /// Stop at the first failing seed (seeds still running are abandoned).
    pub first_failure: bool,
    /// Print every seed's history hash (to compare two runs for determinism).
    pub hashes: bool,
    /// Write the seed's (shrunk) schedule as a scenario file here (`--export`; one seed).
    pub export: Option<PathBuf>,
    /// Shrink the schedule before exporting it.
    pub shrink: bool,
    /// Export the correct lease's finding as a hazard of the configuration (`[expected]`).
    pub hazard: bool,
    /// Shrink and export every failing seed of a batch (at most [`EXPORT_MAX`]) into its run
    /// directory.
    pub export_findings: bool,
    /// A batch ends after this long (a planned end, not an interruption).
    pub time_box: Option<std::time::Duration>,
    /// Print the fault coverage table at the end (summary.json holds it anyway).
    pub coverage: bool,
}

/// A batch exports at most this many findings (each is a shrink of up to 200 worlds).
pub const EXPORT_MAX: usize = 10;

/// The verdict counts of a batch of seeds.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Seeds whose every property held.
    pub pass: u64,
    /// Seeds with a violated property.
    pub fail: u64,
    /// Seeds that proved nothing.
    pub inconclusive: u64,
}

/// One seed's outcome as a worker hands it back.
struct Done {
    seed: u64,
    run: Result<SimRun, HarnessError>,
}

/// Runs the request; prints a line per finding and the totals.
pub fn run(req: &Request, stop: &Arc<AtomicBool>) -> Result<Exit, HarnessError> {
    let scenario = crate::scenario::load(&req.scenario)
        .and_then(|s| match req.nodes {
            Some(k) => crate::scenario::with_nodes(s, &req.scenario, k),
            None => Ok(s),
        })
        .map_err(|e| HarnessError::usage(e.to_string()))?;
    if let Some(file) = &req.export {
        return super::export::run(req, &scenario, file);
    }
    crate::suite::usable_report_dir(&req.report_dir)?;
    let started = Instant::now();
    let (tx, rx) = mpsc::sync_channel::<Done>(64);
    let workers = req.workers.clamp(1, 64);
    // With --first-failure, no seed past the first failing one starts, and every seed before it
    // finishes: the first failure is the smallest failing seed, however the workers interleave.
    let limit = Arc::new(AtomicU64::new(u64::MAX));
    let handles: Vec<_> = (0..workers)
        .map(|w| {
            let (tx, scenario, stop, req) = (tx.clone(), scenario.clone(), stop.clone(), req.clone());
            let limit = limit.clone();
            std::thread::spawn(move || {
                // The lease's own warnings (an uncertain acquire given back, ...) are the
                // history's to tell in a simulation, thousands of times a minute: not the terminal's.
                let _quiet = tracing::subscriber::set_default(tracing::subscriber::NoSubscriber::default());
                // Worker w takes every workers-th seed.
                let mine = (0..req.count).filter(|k| k % workers as u64 == w as u64);
                for k in mine {
                    let boxed = req.time_box.is_some_and(|t| started.elapsed() >= t);
                    if stop.load(Ordering::Relaxed) || boxed || k > limit.load(Ordering::Relaxed) {
                        return;
                    }
                    let seed = req.first.wrapping_add(k);
                    let run = run_seed(&scenario, seed, req.virtual_s, &req.variant);
                    if req.first_failure && run.as_ref().is_ok_and(|r| r.result.verdict == Verdict::Fail) {
                        limit.fetch_min(k, Ordering::Relaxed);
                    }
                    if tx.send(Done { seed, run }).is_err() {
                        return;
                    }
                }
            })
        })
        .collect();
    drop(tx);
    let mut keeper = Keeper {
        req,
        scenario: &scenario,
        suite: None,
        sampled: false,
        findings: Vec::new(),
        coverage: Default::default(),
    };
    let mut counts = Counts::default();
    // Bounded by the seeds, or by Ctrl-C: a stop does not wait for seeds still running (a world
    // that never ends must not keep the command from ending), they go with the process.
    loop {
        match rx.recv_timeout(std::time::Duration::from_millis(200)) {
            Ok(done) => keeper.take(done, &mut counts)?,
            Err(mpsc::RecvTimeoutError::Timeout) if stop.load(Ordering::Relaxed) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    if !stop.load(Ordering::Relaxed) {
        for h in handles {
            let _ = h.join();
        }
    }
    let took = started.elapsed().as_secs_f64();
    let seeds = counts.pass + counts.fail + counts.inconclusive;
    let interrupted = stop.load(Ordering::Relaxed) || req.time_box.is_none();
    let stopped = (seeds < req.count && !(req.first_failure && counts.fail > 0) && interrupted)
        .then(|| format!("interrupted after {seeds} of {} seeds", req.count));
    if seeds < req.count && stopped.is_none() && !req.first_failure {
        println!("the time box ended the batch after {seeds} of {} seeds", req.count);
    }
    if req.first_failure {
        if let Some((first, _)) = keeper.findings.iter().min_by_key(|(seed, _)| *seed) {
            println!("first failure: seed {first}");
        }
    }
    if req.export_findings {
        export_findings(req, &scenario, &keeper.findings)?;
    }
    let page = keeper.finish(stopped.clone())?;
    print_totals(req, counts, seeds, took, stopped.as_deref());
    if let Some(page) = page {
        println!("report: {}", page.display());
    }
    Ok(match (counts.fail, counts.inconclusive, stopped) {
        (f, _, _) if f > 0 => Exit::Failed,
        (_, i, _) if i > 0 => Exit::Inconclusive,
        (_, _, Some(_)) => Exit::Inconclusive,
        // A time box that ended before any seed ran observed nothing.
        _ if seeds == 0 => Exit::Inconclusive,
        _ => Exit::Passed,
    })
}

fn print_totals(req: &Request, c: Counts, seeds: u64, took_s: f64, stopped: Option<&str>) {
    let per_min = if took_s > 0.0 { seeds as f64 * 60.0 / took_s } else { 0.0 };
    let ratio = if took_s > 0.0 { (seeds * req.virtual_s) as f64 / took_s } else { 0.0 };
    if let Some(why) = stopped {
        println!("stopped: {why}");
    }
    println!(
        "{seeds} seeds of {} virtual s in {took_s:.1} s on {} workers: {per_min:.0} seeds/min, virtual/wall {ratio:.0}x",
        req.virtual_s, req.workers
    );
    println!("PASS {}  FAIL {}  INCONCLUSIVE {}", c.pass, c.fail, c.inconclusive);
}

/// Shrinks and exports each finding (at most [`EXPORT_MAX`]) as `shrunk.toml` in its run
/// directory.
fn export_findings(req: &Request, scenario: &Scenario, findings: &[(u64, PathBuf)]) -> Result<(), HarnessError> {
    if findings.len() > EXPORT_MAX {
        println!("exporting the first {EXPORT_MAX} of {} findings", findings.len());
    }
    for (seed, dir) in findings.iter().take(EXPORT_MAX) {
        let one = Request { first: *seed, count: 1, shrink: true, ..req.clone() };
        let file = dir.join("shrunk.toml");
        println!("== exporting seed {seed} to {} ==", file.display());
        super::export::run(&one, scenario, &file)?;
    }
    Ok(())
}

/// Keeps failing seeds and one passing sample as run directories of a suite.
struct Keeper<'a> {
    req: &'a Request,
    scenario: &'a Scenario,
    suite: Option<SuiteDir>,
    sampled: bool,
    /// Failing seeds and their run directories.
    findings: Vec<(u64, PathBuf)>,
    /// The fault cells every seed exercised.
    coverage: leasequake_reports::coverage::Coverage,
}

impl Keeper<'_> {
    fn take(&mut self, done: Done, counts: &mut Counts) -> Result<(), HarnessError> {
        let run = match done.run {
            Ok(r) => r,
            Err(e) => {
                counts.inconclusive += 1;
                println!("INCONCLUSIVE  seed {:<20} the world could not be built: {e}", done.seed);
                return Ok(());
            }
        };
        self.coverage.add(&run.lines);
        let verdict = run.result.verdict;
        match verdict {
            Verdict::Pass => counts.pass += 1,
            Verdict::Fail => counts.fail += 1,
            Verdict::Inconclusive => counts.inconclusive += 1,
        }
        let single = self.req.count == 1;
        if single || self.req.hashes {
            println!("seed {} history {}", done.seed, history_hash(&run.lines));
        }
        let sample = verdict == Verdict::Pass && !self.sampled;
        if verdict != Verdict::Pass || sample || single {
            self.sampled |= sample;
            let dir = self.keep(done.seed, &run)?;
            if verdict != Verdict::Pass {
                let finding =
                    run.result.properties.iter().find(|p| p.status == leasequake_reports::PropertyStatus::Violated);
                let said = finding
                    .map_or_else(|| run.result.inconclusive.join("; "), |p| format!("{}: {}", p.name, p.sentence));
                println!(
                    "{:<13} seed {:<20} {}  [{}]",
                    format!("{verdict:?}").to_uppercase(),
                    done.seed,
                    escaped(&said),
                    dir.display()
                );
                println!("  replay: {}", self.replay(done.seed));
                if verdict == Verdict::Fail {
                    self.findings.push((done.seed, dir));
                }
            }
        }
        Ok(())
    }

    /// The command that replays `seed` exactly.
    fn replay(&self, seed: u64) -> String {
        let mut args = vec![
            "sim".to_owned(),
            "--seed".to_owned(),
            seed.to_string(),
            "--scenario".to_owned(),
            self.req.scenario.display().to_string(),
            "--virtual-s".to_owned(),
            self.req.virtual_s.to_string(),
        ];
        if let Some(k) = self.req.nodes {
            args.extend(["--nodes".to_owned(), k.to_string()]);
        }
        if let Some(flaw) = &self.req.flaw {
            args.extend(["--flaw".to_owned(), flaw.clone()]);
        }
        crate::command_line::command(args)
    }

    /// Writes the seed's history, verdicts and scenario into the suite's next run directory.
    fn keep(&mut self, seed: u64, run: &SimRun) -> Result<PathBuf, HarnessError> {
        if self.suite.is_none() {
            self.suite = Some(SuiteDir::create(&self.req.report_dir)?);
        }
        let repro = self.replay(seed);
        let Some(suite) = self.suite.as_mut() else { return Ok(PathBuf::new()) };
        let dir = suite.next_run_dir(&format!("{}-seed-{seed}", self.scenario.name));
        std::fs::create_dir_all(&dir).map_err(HarnessError::io(format!("creating {}", dir.display())))?;
        let mut lines = run.lines.clone();
        crate::history::seal(&mut lines);
        crate::history::write(&dir.join(crate::history::HISTORY_FILE), &lines)?;
        let json = serde_json::to_vec_pretty(&run.result)
            .map_err(|e| HarnessError::History { path: dir.clone(), detail: e.to_string() })?;
        crate::history::write_atomically(&dir.join(crate::history::VERDICTS_FILE), &json)?;
        let _ = std::fs::copy(&self.req.scenario, dir.join("scenario.toml"));
        suite.add(
            ScenarioRun {
                name: self.scenario.name.clone(),
                file: self.req.scenario.display().to_string(),
                description: format!("simulated, {} virtual s", self.req.virtual_s),
                seed,
                dir: dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
                took_s: 0.0,
                config: Default::default(),
                expected: self.scenario.expected_failure(),
                result: Some(run.result.clone()),
                error: None,
                repro,
                rerun: String::new(),
                extended_ms: None,
            },
            &Default::default(),
        );
        Ok(dir)
    }

    fn finish(&mut self, stopped: Option<String>) -> Result<Option<PathBuf>, HarnessError> {
        if self.req.coverage {
            println!("\nFault coverage over every seed run (fault kind x the target's phase when it began):\n");
            println!("{}", self.coverage.markdown(&leasequake_reports::history::FaultKind::ALL));
        }
        let coverage = std::mem::take(&mut self.coverage);
        self.suite
            .as_mut()
            .map(|s| {
                s.set_coverage(coverage);
                s.finish(stopped)
            })
            .transpose()
    }
}

/// A history's hash for comparing replays: SHA-256 over every line but the header's run id and
/// the snapshot's versions and seal (both name the build, not the run).
#[must_use]
pub fn history_hash(lines: &[HistoryLine]) -> String {
    let mut h = Sha256::new();
    for line in lines {
        let line = match line {
            HistoryLine::Header(hd) => {
                let mut hd = hd.clone();
                hd.run_id.clear();
                HistoryLine::Header(hd)
            }
            HistoryLine::Snapshot(s) => {
                let mut s = s.clone();
                s.versions.clear();
                s.seal = None;
                HistoryLine::Snapshot(s)
            }
            other => other.clone(),
        };
        h.update(serde_json::to_string(&line).unwrap_or_default().as_bytes());
        h.update(b"\n");
    }
    format!("{:x}", h.finalize())
}

/// Where `leasequake sim` reads its default scenario.
#[must_use]
pub fn default_scenario() -> &'static Path {
    Path::new("scenarios/sim/recommended.toml")
}
