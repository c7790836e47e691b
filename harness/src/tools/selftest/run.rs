//! `leasequake selftest`: writes each entry's variant, loads it beside the controls, runs them
//! seed by seed into one suite, prints a line per run and the table, and ends by the table.

use std::path::{Path, PathBuf};
use std::time::Duration;

use leasequake_reports::suite::ScenarioRun;

use super::{controls, exit_code, markdown, row, select, write_variant, Caught, Entry, Row};
use crate::error::HarnessError;
use crate::exit::Exit;
use crate::report::SuiteDir;
use crate::run::RunOptions;
use crate::scenario::Scenario;
use crate::suite::{interrupt_on_signal_or_after, run_one, usable_report_dir};

/// What the self-test was asked to do.
#[derive(Debug)]
pub struct Request {
    /// Where the suite directory goes.
    pub report_dir: PathBuf,
    /// Seeds per entry and control.
    pub seeds: u32,
    /// The first seed.
    pub first_seed: u64,
    /// Only these catalogue entries (all when empty).
    pub only: Vec<String>,
    /// The self-test node build (default target/flawed/debug/leasequake).
    pub flawed_node: Option<PathBuf>,
    /// Stops after this long (every entry gets its first seed before any its second).
    pub max_duration: Option<Duration>,
    /// At most this many flaw findings of `scenarios/found` (all when `None`).
    pub found_limit: Option<usize>,
}

/// A run to make: a catalogue entry's variant (its index) or a control (`None`).
struct Planned {
    entry: Option<usize>,
    file: PathBuf,
    scenario: Scenario,
}

/// Runs the self-test.
pub async fn run(req: Request) -> Result<Exit, HarnessError> {
    usable_report_dir(&req.report_dir)?;
    let root = PathBuf::from(".");
    if !root.join("scenarios/selftest").is_dir() {
        return Err(HarnessError::usage(
            "scenarios/selftest not found here: run the self-test from the checkout's root",
        ));
    }
    let mut all = super::CATALOGUE.to_vec();
    all.extend(super::found(&root)?.into_iter().take(req.found_limit.unwrap_or(usize::MAX)));
    let entries = select(&all, &req.only).map_err(HarnessError::usage)?;
    let flawed = flawed_node(req.flawed_node.clone())?;
    let interrupt = interrupt_on_signal_or_after(req.max_duration);
    let mut suite = SuiteDir::create(&req.report_dir)?;
    let plan = plan(&root, &entries, &flawed, &suite.dir().join("selftest-scenarios"))?;
    let seeds: Vec<u64> = (0..u64::from(req.seeds)).map(|k| req.first_seed.saturating_add(k)).collect();
    let opts = RunOptions { seed: None, node_cmd: None, attach: None, progress: crate::progress::Progress::stderr() };
    let total = seeds.len() * plan.len();
    let mut results: Vec<(Option<usize>, PathBuf, ScenarioRun)> = Vec::new();
    // Seed by seed, so that a run cut short by --max-duration still covers every entry.
    'all: for seed in &seeds {
        for p in &plan {
            if interrupt.fired() {
                break 'all;
            }
            let what = p.entry.map_or_else(|| "control".to_owned(), |i| entries[i].name.to_owned());
            let label = format!("[{}/{total}] {what} seed {seed}", results.len() + 1);
            let run = run_one(&mut suite, &p.file, &p.scenario, *seed, &opts, &interrupt, &label).await;
            let said = match p.entry {
                Some(i) => format!("{what:<32} seed {seed:<4} {}", said(&entries[i], &run, suite.dir())),
                None => format!(
                    "{:<32} seed {seed:<4} {} {}",
                    format!("control {}", p.scenario.name),
                    run.shown().label(),
                    run.finding()
                ),
            };
            println!("{said}  [{}]", suite.dir().join(&run.dir).display());
            results.push((p.entry, p.file.clone(), run));
        }
    }
    let rows = rows(&entries, &results, suite.dir());
    let table = markdown(&rows, &seeds);
    println!("\n{table}");
    write_tables(suite.dir(), &table, &rows)?;
    let stopped = interrupt.reason().map(|reason| {
        println!("stopped: {reason}; {} of {total} runs not started", total - results.len());
        reason
    });
    let page = suite.finish(stopped)?;
    println!("report: {}  (table: {})", page.display(), suite.dir().join("selftest.md").display());
    Ok(match exit_code(&rows) {
        0 if interrupt.fired() => Exit::Inconclusive,
        c => Exit::from_code(c),
    })
}

/// The self-test node build, which must exist.
fn flawed_node(given: Option<PathBuf>) -> Result<PathBuf, HarnessError> {
    let flawed = given.unwrap_or_else(|| "target/flawed/debug/leasequake".into());
    match std::fs::canonicalize(&flawed) {
        Ok(p) if p.is_file() => Ok(p),
        _ => Err(HarnessError::usage(format!(
            "no self-test node at {}: build it with `cargo build -p leasequake --features flaws \
             --target-dir target/flawed` (scripts/leasequake selftest does), or name it with --flawed-node",
            flawed.display()
        ))),
    }
}

/// Each entry's variant written out and loaded, then the controls.
fn plan(root: &Path, entries: &[Entry], flawed: &Path, variants_dir: &Path) -> Result<Vec<Planned>, HarnessError> {
    let mut files: Vec<(Option<usize>, PathBuf)> = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        files.push((Some(i), write_variant(root, e, flawed, variants_dir)?));
    }
    files.extend(controls(entries).into_iter().map(|c| (None, PathBuf::from(c))));
    files
        .into_iter()
        .map(|(entry, file)| {
            let scenario = crate::scenario::load(&file).map_err(|e| HarnessError::usage(e.to_string()))?;
            Ok(Planned { entry, file, scenario })
        })
        .collect()
}

/// What one run of an entry's variant said of it.
fn said(e: &Entry, run: &ScenarioRun, suite_dir: &Path) -> String {
    let c = Caught::of(run, suite_dir);
    if c.caught_by(e.expect) {
        format!("caught by {}", c.by.join(", "))
    } else if !c.by.is_empty() {
        format!("not caught by {} (only by {})", e.expect.unwrap_or("-"), c.by.join(", "))
    } else if c.inconclusive {
        format!("inconclusive: {}", run.finding())
    } else {
        "not caught".into()
    }
}

/// The table's rows: each entry with its runs and its control's.
fn rows(entries: &[Entry], results: &[(Option<usize>, PathBuf, ScenarioRun)], suite_dir: &Path) -> Vec<Row> {
    entries
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let runs = results
                .iter()
                .filter(|(entry, _, _)| *entry == Some(i))
                .map(|(_, _, r)| Caught::of(r, suite_dir))
                .collect();
            let control: Vec<&ScenarioRun> = results
                .iter()
                .filter(|(entry, file, _)| entry.is_none() && file.as_path() == Path::new(e.control))
                .map(|(_, _, r)| r)
                .collect();
            row(e, runs, &control)
        })
        .collect()
}

/// selftest.md and selftest.json in the suite directory.
fn write_tables(dir: &Path, table: &str, rows: &[Row]) -> Result<(), HarnessError> {
    let md = dir.join("selftest.md");
    std::fs::write(&md, table).map_err(HarnessError::io(format!("writing {}", md.display())))?;
    let json = serde_json::to_string_pretty(rows).map_err(|e| HarnessError::Io {
        what: "serialising the self-test table".into(),
        source: std::io::Error::other(e),
    })?;
    let file = dir.join("selftest.json");
    std::fs::write(&file, json).map_err(HarnessError::io(format!("writing {}", file.display())))
}
