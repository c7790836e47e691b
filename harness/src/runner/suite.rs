//! The suite runner: scenario files in, one suite directory out. `leasequake run` runs them here,
//! one after another (`--repeat`, `--shard`), or as `--parallel` child processes over shards
//! ([`parallel`]); `repro` and the self-test run theirs through [`run_one`]. Ctrl-C, SIGTERM and
//! `--max-duration` stop a suite between runs and inside one ([`interrupt_on_signal_or_after`]).

pub mod parallel;
pub mod repro;
pub mod shrink;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use leasequake_reports::escaped;
use leasequake_reports::suite::ScenarioRun;
use tokio_util::sync::CancellationToken;

use crate::error::HarnessError;
use crate::exit::Exit;
use crate::report::SuiteDir;
use crate::run::{Attach, Interrupt, RunOptions};
use crate::scenario::{self, Scenario};

/// What `leasequake run` was asked to do.
#[derive(Debug)]
pub struct Request {
    /// Scenario files and folders.
    pub paths: Vec<PathBuf>,
    /// Where the suite directory goes.
    pub report_dir: PathBuf,
    /// Overrides every scenario's seed.
    pub seed: Option<u64>,
    /// Runs of each scenario.
    pub repeat: u32,
    /// Stops the suite after this long.
    pub max_duration: Option<Duration>,
    /// Overrides the scenarios' node command (split on whitespace).
    pub node_cmd: Option<String>,
    /// Attach to this `env up` environment, with this password file.
    pub attach: Option<(String, Option<PathBuf>)>,
    /// Only this shard (K, N) of the sorted files.
    pub shard: Option<(usize, usize)>,
    /// Child processes over shards (1: this process).
    pub parallel: u32,
}

/// `leasequake run`: every scenario (times `repeat`), one line each, the exit of the whole.
pub async fn run(req: Request) -> Result<Exit, HarnessError> {
    usable_report_dir(&req.report_dir)?;
    if req.parallel > 1 {
        return parallel::run(&req).await;
    }
    let attach = match &req.attach {
        None => None,
        Some((run_id, file)) => Some(Attach::resolve(run_id, file.as_deref())?),
    };
    let opts = RunOptions {
        seed: req.seed,
        node_cmd: req.node_cmd.as_ref().map(|c| c.split_whitespace().map(str::to_owned).collect()),
        attach,
        progress: crate::progress::Progress::stderr(),
    };
    let mut files = scenario::discover(&req.paths);
    // Every file is checked, and the names across all of them, before a shard takes its part.
    load_all(&files)?;
    if let Some((k, n)) = req.shard {
        let all = files.len();
        files = scenario::shard(files, k, n);
        eprintln!("shard {k}/{n}: {} of {all} scenario files", files.len());
        if files.is_empty() {
            println!("shard {k}/{n} has no scenario files (only {all} in all): nothing to run");
            return Ok(Exit::Passed);
        }
    }
    let scenarios = load_all(&files)?;
    if scenarios.is_empty() {
        return Err(HarnessError::usage(format!("no scenario files (*.toml) under {:?}", req.paths)));
    }
    // A shard's runs are tallied by the parent that merges them.
    let tally = req.repeat > 1 && req.shard.is_none();
    run_loaded(scenarios, &req.report_dir, &opts, req.repeat, req.max_duration, tally).await
}

/// Every file loaded and validated, or the first one's problem; two files of one scenario name
/// are a problem too (a suite's run directories, reports and repro lines are named by it).
pub fn load_all(files: &[PathBuf]) -> Result<Vec<(PathBuf, Scenario)>, HarnessError> {
    let loaded: Vec<(PathBuf, Scenario)> = files
        .iter()
        .map(|f| scenario::load(f).map(|s| (f.clone(), s)).map_err(|e| HarnessError::usage(e.to_string())))
        .collect::<Result<_, _>>()?;
    let mut names: std::collections::HashMap<&str, &PathBuf> = std::collections::HashMap::new();
    for (file, s) in &loaded {
        if let Some(first) = names.insert(&s.name, file) {
            return Err(HarnessError::usage(format!(
                "{}: scenario name {:?} is also the name of {}: names must be unique in a run (rename one)",
                file.display(),
                leasequake_reports::printable(&s.name),
                first.display()
            )));
        }
    }
    Ok(loaded)
}

/// Before anything starts: every node command can be started (a missing venv, a typo), and an
/// environment to attach to exists, answers, takes the password, and has proxy ports for the
/// largest scenario.
async fn preflight(scenarios: &[(PathBuf, Scenario)], opts: &RunOptions) -> Result<(), HarnessError> {
    for (file, s) in scenarios {
        if let Some(cmd) = opts.node_cmd.as_ref().or(s.nodes.command.as_ref()) {
            crate::run::startable(cmd).map_err(|problem| {
                HarnessError::usage(format!("{}: the node command cannot be started: {problem}", file.display()))
            })?;
        }
    }
    if let Some(a) = &opts.attach {
        let nodes = scenarios.iter().map(|(_, s)| s.nodes.count).max().unwrap_or(1);
        let docker = crate::docker::connect().await?;
        crate::env::Environment::attach(docker, &a.run_id, a.password.clone(), nodes)
            .await
            .map_err(|e| HarnessError::usage(e.to_string()))?;
    }
    Ok(())
}

/// Runs loaded scenarios as one suite.
pub async fn run_loaded(
    scenarios: Vec<(PathBuf, Scenario)>,
    report_dir: &Path,
    opts: &RunOptions,
    repeat: u32,
    max_duration: Option<Duration>,
    tally: bool,
) -> Result<Exit, HarnessError> {
    preflight(&scenarios, opts).await?;
    let interrupt = interrupt_on_signal_or_after(max_duration);
    let total = scenarios.len() * repeat as usize;
    let mut suite = SuiteDir::create(report_dir)?;
    let mut done = 0;
    // The name column fits the suite's longest name.
    let width = scenarios.iter().map(|(_, sc)| sc.name.chars().count()).max().unwrap_or(0);
    'all: for (file, sc) in &scenarios {
        for k in 0..repeat {
            if interrupt.fired() {
                break 'all;
            }
            done += 1;
            let label = if repeat > 1 {
                format!("[{done}/{total}] {} #{}", sc.name, k + 1)
            } else {
                format!("[{done}/{total}] {}", sc.name)
            };
            let seed = crate::run::seed_for(sc, opts);
            let run = run_one(&mut suite, file, sc, seed, opts, &interrupt, &label).await;
            print_outcome(&suite, sc, &run, width);
        }
    }
    let stopped = interrupt.reason().map(|reason| {
        println!("stopped: {reason}; {} of {total} scenario runs not started", total - done);
        reason
    });
    let page = suite.finish(stopped)?;
    if tally {
        print!("{}", suite.tally());
    }
    println!("report: {}", page.display());
    Ok(suite.verdict().into())
}

/// A run's line, and for anything but a pass, the command that replays it.
fn print_outcome(suite: &SuiteDir, sc: &Scenario, run: &ScenarioRun, width: usize) {
    let dir = suite.dir().join(&run.dir);
    println!(
        "{:<13} {:<width$} seed {:<20} {}  [{}]",
        run.shown().label(),
        sc.name,
        run.seed,
        escaped(&run.finding()),
        dir.display()
    );
    if run.verdict() != leasequake_reports::Verdict::Pass {
        println!("  repro: {}", run.repro);
        println!("  or, from the scenario file (the schedule drawn again): {}", run.rerun);
    }
}

/// The exact replay of the run in `dir` and the re-run of its scenario file, as commands a
/// person runs as printed. A replay runs the same nodes only when told to on its command line.
fn commands(dir: &Path, file: &Path, sc: &Scenario, seed: u64, opts: &RunOptions) -> (String, String) {
    let mut repro = vec!["repro".to_owned(), dir.display().to_string()];
    if let Some(c) = opts.node_cmd.as_ref().or(sc.nodes.command.as_ref()) {
        repro.extend(["--node-cmd".to_owned(), c.join(" ")]);
    }
    let mut rerun = vec!["run".to_owned(), file.display().to_string(), "--seed".to_owned(), seed.to_string()];
    if let Some(a) = &opts.attach {
        rerun.extend(["--env".to_owned(), a.run_id.clone()]);
    }
    if let Some(c) = &opts.node_cmd {
        rerun.extend(["--node-cmd".to_owned(), c.join(" ")]);
    }
    (crate::command_line::command(repro), crate::command_line::command(rerun))
}

/// Runs one scenario with `seed` into the suite's next run directory and records it in the suite.
pub async fn run_one(
    suite: &mut SuiteDir,
    file: &Path,
    sc: &Scenario,
    seed: u64,
    opts: &RunOptions,
    interrupt: &Interrupt,
    label: &str,
) -> ScenarioRun {
    opts.progress.scenario(label, sc.faults.len());
    let ticker = CancellationToken::new();
    let tick = tokio::spawn(opts.progress.clone().tick(ticker.clone()));
    let dir = suite.next_run_dir(&sc.name);
    let began = Instant::now();
    let outcome = crate::run::run(sc, seed, &dir, opts, interrupt).await;
    ticker.cancel();
    let _ = tick.await;
    opts.progress.clear();
    let _ = std::fs::copy(file, dir.join("scenario.toml"));
    let (repro, rerun) = commands(&dir, file, sc, seed, opts);
    let mut run = ScenarioRun {
        name: sc.name.clone(),
        file: file.display().to_string(),
        description: sc.description.clone(),
        seed,
        dir: dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
        took_s: began.elapsed().as_secs_f64(),
        config: scenario_config(sc, opts),
        expected: sc.expected_failure(),
        result: None,
        error: None,
        repro,
        rerun,
        extended_ms: None,
    };
    let versions = match outcome {
        Ok(out) => {
            run.result = Some(out.result);
            run.extended_ms = out.extended_ms;
            out.versions
        }
        Err(e) => {
            run.error = Some(e.to_string());
            BTreeMap::default()
        }
    };
    suite.add(run.clone(), &versions);
    run
}

/// The scenario's configuration as run, for summary.json.
fn scenario_config(s: &Scenario, opts: &RunOptions) -> BTreeMap<String, String> {
    let mut c = BTreeMap::new();
    c.insert("nodes".into(), s.nodes.count.to_string());
    c.insert("ttl_ms".into(), s.lease.ttl_ms.to_string());
    c.insert("renew_ms".into(), s.renew_ms().to_string());
    c.insert("acquire_wait_ms".into(), s.acquire_wait_ms().to_string());
    c.insert("checkpoints".into(), format!("{:?}", s.pipeline.checkpoints));
    c.insert("store_policy".into(), format!("{:?}", s.store.policy).to_lowercase());
    c.insert("fence_source".into(), format!("{:?}", s.store.fence_source).to_lowercase());
    c.insert("duration_s".into(), s.duration_s.to_string());
    c.insert("faults".into(), s.faults.iter().map(|f| f.kind.name()).collect::<Vec<_>>().join(","));
    let cmd = opts.node_cmd.as_ref().or(s.nodes.command.as_ref()).map_or("reference node".into(), |c| c.join(" "));
    c.insert("node_command".into(), cmd);
    if let Some(a) = &opts.attach {
        c.insert("environment".into(), format!("attached: {}", a.run_id));
    }
    c
}

/// Completes on Ctrl-C or SIGTERM.
pub async fn terminated() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        Some(()) = async { match term.as_mut() { Some(t) => t.recv().await, None => std::future::pending().await } } => {}
    }
}

/// An interrupt fired by Ctrl-C or SIGTERM, or when `max_duration` has passed.
pub fn interrupt_on_signal_or_after(max_duration: Option<Duration>) -> Interrupt {
    let interrupt = Interrupt::new();
    let i = interrupt.clone();
    tokio::spawn(async move {
        terminated().await;
        i.fire("interrupted (Ctrl-C or SIGTERM)");
    });
    if let Some(limit) = max_duration {
        let i = interrupt.clone();
        tokio::spawn(async move {
            tokio::time::sleep(limit).await;
            i.fire(&format!("--max-duration {}s reached", limit.as_secs()));
        });
    }
    interrupt
}

/// Whether run directories can be written under `dir` (created if missing): else what is wrong.
pub fn usable_report_dir(dir: &Path) -> Result<(), HarnessError> {
    let fix = "choose another with --report-dir";
    if dir.exists() && !dir.is_dir() {
        return Err(HarnessError::usage(format!("--report-dir {} is a file, not a directory: {fix}", dir.display())));
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| HarnessError::usage(format!("--report-dir {}: cannot create it ({e}): {fix}", dir.display())))?;
    let probe = dir.join(format!(".write-probe-{}", std::process::id()));
    std::fs::write(&probe, b"")
        .map_err(|e| HarnessError::usage(format!("--report-dir {}: cannot write in it ({e}): {fix}", dir.display())))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}
