//! The `leasequake` command line.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use leasequake::demo::{self, DemoConfig};
use leasequake::local_redis::LocalRedis;
use leasequake_reports::history::{FenceSource, StorePolicy};
use leasequake_reports::{escaped, printable};
use tokio_util::sync::CancellationToken;

/// The exit codes, in one place (README): 0 pass, 1 fail, 2 usage or an input to fix, 3
/// inconclusive.
mod exit {
    use std::process::ExitCode;

    use leasequake_reports::Verdict;

    /// A command line, a file or an environment the user can fix.
    pub fn usage() -> ExitCode {
        ExitCode::from(2)
    }
    /// Neither a pass nor a failure was observed.
    pub fn inconclusive() -> ExitCode {
        ExitCode::from(3)
    }
    /// A check found a problem (`doctor`, the demo): the failure code.
    pub fn failed() -> ExitCode {
        ExitCode::from(1)
    }
    /// A code computed elsewhere (the self-test's table), passed through.
    pub fn code(c: u8) -> ExitCode {
        ExitCode::from(c)
    }
    /// A verdict's own code.
    pub fn verdict(v: Verdict) -> ExitCode {
        u8::try_from(v.exit_code()).map_or_else(|_| inconclusive(), ExitCode::from)
    }
}

#[derive(Parser)]
#[command(name = "leasequake", version, about = "Proves a Redis-leased job never lets a stale node write")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The chaos environment by hand: `env up` starts one and prints its addresses until Ctrl-C;
    /// `env down` removes what `env up` started (from another terminal, or after a crash).
    Env {
        #[command(subcommand)]
        action: EnvAction,
    },
    /// Run scenarios (files or directories), one after another, each in a fresh environment.
    /// Exit 0 every verdict as expected, 1 a check failed, 2 a scenario is invalid, 3 inconclusive.
    /// Ctrl-C (or SIGTERM) heals the faults, records what was seen, removes the environment and
    /// makes the run inconclusive.
    Run(RunArgs),
    /// Suite reports: `report merge` combines suite directories (the shards of one nightly, say)
    /// into one suite with one summary.json, junit.xml, summary.md and report.html.
    Report {
        #[command(subcommand)]
        action: ReportAction,
    },
    /// Re-run a recorded run exactly: its scenario as run, its seed, its nodes and its schedule
    /// as executed (the same faults on the same nodes at the same times, random draws replaced by
    /// what they resolved to; a triggered fault waits for the same event on the same node). Exit
    /// codes as for `run`.
    Repro {
        /// A run directory (`reports-out/latest/02-owner-cut-from-redis`).
        dir: std::path::PathBuf,
        /// Where the new run directory goes.
        #[arg(long, default_value = "reports-out")]
        report_dir: std::path::PathBuf,
        /// The node command to replay with. A command recorded in the run directory (its
        /// history header, its scenario's `[nodes] command`) is never run on its own: a
        /// downloaded artifact could name any program. Pass it here, or confirm it with
        /// --run-recorded-command.
        #[arg(long)]
        node_cmd: Option<String>,
        /// Run the node command recorded in the run directory (printed first).
        #[arg(long, conflicts_with = "node_cmd")]
        run_recorded_command: bool,
    },
    /// Measure the speed figures against their targets (images, environment start, fault effect
    /// times, checker and report on 1 M history lines), print them with their ratios and write
    /// them as JSON. Removes and rebuilds the images: refuses while another run's containers
    /// exist. `--checker-only` measures the checker and the report alone (no Docker).
    Bench {
        /// Samples per fault figure.
        #[arg(long, default_value_t = 50)]
        samples: usize,
        /// Where the figures go (JSON).
        #[arg(long, default_value = "reports-out/bench.json")]
        out: std::path::PathBuf,
        /// Only the checker and the report rendering.
        #[arg(long)]
        checker_only: bool,
        /// Also time these scenarios (e.g. scenarios/nightly) as a suite at parallelism 1 and 2,
        /// with their verdicts (a failure at 2 that 1 did not have is a false failure from load).
        #[arg(long, value_name = "PATH")]
        suite: Vec<std::path::PathBuf>,
    },
    /// Prove the checks fail when they must: run every entry of the flaw catalogue (lease flaws,
    /// configuration hazards, a store flaw; docs/detection.md) on the scenario that should expose
    /// it, and each entry's control, over N seeds; print which check caught what, how often, how
    /// fast. Exit 0 every entry caught in >= 9/10 runs and every control passed; 1 an entry missed
    /// or a control failed; 2 bad input (no self-test node build); 3 inconclusive.
    Selftest {
        /// Where the suite directory goes.
        #[arg(long, default_value = "reports-out")]
        report_dir: std::path::PathBuf,
        /// Seeds per entry and per control (seeds FIRST, FIRST+1, ...).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
        seeds: u32,
        /// The first seed.
        #[arg(long, default_value_t = 1)]
        first_seed: u64,
        /// Only these entries (repeatable).
        #[arg(long = "entry", value_name = "NAME")]
        entries: Vec<String>,
        /// The self-test node build (default target/flawed/debug/leasequake; scripts/leasequake
        /// builds it: `cargo build -p leasequake --features flaws --target-dir target/flawed`).
        #[arg(long)]
        flawed_node: Option<std::path::PathBuf>,
        /// Stop after this long (as `run --max-duration`).
        #[arg(long, value_parser = parse_duration)]
        max_duration: Option<Duration>,
    },
    /// List scenarios (files or directories) with their one-line descriptions; exit 2 if any is
    /// invalid, naming file, line and field.
    List {
        /// Scenario files or directories (default: scenarios/).
        paths: Vec<std::path::PathBuf>,
    },
    /// Check the Docker engine, the address pool, the images, leftovers and tools; say what to fix.
    Doctor,
    /// Remove every container and network the harness ever labelled (all runs); with --images, the
    /// images too.
    Clean {
        #[arg(long)]
        images: bool,
    },
    /// Container images the harness runs, built locally from this checkout (no registry).
    Images {
        #[command(subcommand)]
        action: ImagesAction,
    },
    /// Re-judge a recorded run: reads DIR/history.jsonl, rewrites DIR/verdicts.json, prints the
    /// verdict per property; exit 0 pass, 1 fail, 3 inconclusive.
    Check {
        /// The run directory.
        dir: std::path::PathBuf,
    },
    /// Run as a node: the reference tenant-sync job, speaking the node protocol on stdin/stdout.
    Node {
        /// Self-test only: run the lease with this known flaw (docs/detection.md). Only the
        /// self-test build accepts it: `cargo build -p leasequake --features flaws --target-dir
        /// target/flawed`.
        #[arg(long)]
        flaw: Option<String>,
    },
    /// Run the vector store (the run's ground truth: its audit log).
    VectorStore {
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:7700")]
        listen: String,
        /// `enforce` rejects writes under an older fence; `observe` accepts everything.
        #[arg(long, value_enum, default_value = "enforce")]
        policy: PolicyArg,
        /// Also append every audit record to this file (JSON lines).
        #[arg(long)]
        audit_file: Option<std::path::PathBuf>,
    },
    /// Nodes contend for one tenant's lease on a real Redis and write to a real store; then every
    /// acknowledged write is looked up in the store's audit log.
    Demo(DemoArgs),
}

#[derive(clap::Args)]
struct DemoArgs {
    /// Use this Redis instead of starting a local redis-server.
    #[arg(long)]
    redis: Option<String>,
    /// How many nodes.
    #[arg(long, default_value_t = 3)]
    nodes: u32,
    /// The node command (default: this binary's reference node), e.g.
    /// "target/python-node-venv/bin/python harness/tests/python-node/node.py".
    #[arg(long)]
    node_cmd: Option<String>,
    #[arg(long, default_value = "tenant-a")]
    tenant: String,
    /// Lease ttl in ms (production: 120000; the other durations keep its ratios).
    #[arg(long, default_value_t = 1500)]
    ttl_ms: u64,
    /// How long to run, in seconds.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Store fencing policy.
    #[arg(long, value_enum, default_value = "enforce")]
    policy: PolicyArg,
    /// Take fences from the store (`begin epoch`) instead of the lease's Redis counter.
    #[arg(long)]
    store_fences: bool,
}

#[derive(clap::Args)]
struct RunArgs {
    /// Scenario files or directories.
    paths: Vec<std::path::PathBuf>,
    /// Override every scenario's seed (every repetition then uses it).
    #[arg(long)]
    seed: Option<u64>,
    /// Where run directories go.
    #[arg(long, default_value = "reports-out")]
    report_dir: std::path::PathBuf,
    /// Run each scenario N times (a fresh random seed each time, unless a seed is fixed).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    repeat: u32,
    /// Stop after this long (e.g. 90s, 15m, 2h): the running scenario is stopped as by
    /// Ctrl-C (inconclusive) and the rest are not started.
    #[arg(long, value_parser = parse_duration)]
    max_duration: Option<Duration>,
    /// The node command for every scenario (default: the scenario's, else the reference
    /// node), e.g. "target/python-node-venv/bin/python harness/tests/python-node/node.py".
    #[arg(long)]
    node_cmd: Option<String>,
    /// Run in an already-running environment instead of a fresh one: the run id `env up`
    /// printed, or `compose` for docker-compose.yml. It is left running afterwards.
    #[arg(long = "env", value_name = "RUN_ID")]
    env_id: Option<String>,
    /// With --env: the file holding its Redis password (default: the one `env up` wrote,
    /// else $LEASEQUAKE_REDIS_PASSWORD).
    #[arg(long, requires = "env_id")]
    redis_password_file: Option<std::path::PathBuf>,
    /// Run only shard K of N (1-based): every Nth scenario file, in sorted order, starting at
    /// the Kth; merge the shards' suites with `leasequake report merge`.
    #[arg(long, value_parser = parse_shard, value_name = "K/N")]
    shard: Option<(usize, usize)>,
    /// Run N scenarios at once, each in an environment of its own: N child runs over the
    /// shards 1/N..N/N, merged into one suite at the end (their lines are prefixed [k/N]).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=8),
          conflicts_with_all = ["shard", "env_id"])]
    parallel: u32,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum PolicyArg {
    Enforce,
    Observe,
    /// Self-test only: enforce, except that the persist is never checked (a store bug).
    FlawedSkipsPersist,
}

impl From<PolicyArg> for StorePolicy {
    fn from(p: PolicyArg) -> Self {
        match p {
            PolicyArg::Enforce => StorePolicy::Enforce,
            PolicyArg::Observe => StorePolicy::Observe,
            PolicyArg::FlawedSkipsPersist => StorePolicy::FlawedSkipsPersist,
        }
    }
}

#[derive(Subcommand)]
enum EnvAction {
    /// Start an environment and keep it until Ctrl-C.
    Up {
        /// Nodes to reserve proxy ports for.
        #[arg(long, default_value_t = 3)]
        nodes: u32,
        /// Sentinel down-after-milliseconds.
        #[arg(long, default_value_t = 1000)]
        down_after_ms: u64,
        /// The store's fencing policy.
        #[arg(long, value_enum, default_value = "enforce")]
        policy: PolicyArg,
    },
    /// Remove every environment `env up` started.
    Down,
}

#[derive(Subcommand)]
enum ReportAction {
    /// Merge suite directories into a new one under --report-dir; exit code from the merged verdict.
    Merge {
        /// Suite directories (each holding summary.json), e.g. the shards' `reports-out/latest`.
        suites: Vec<std::path::PathBuf>,
        /// Where the merged suite directory goes.
        #[arg(long, default_value = "reports-out")]
        report_dir: std::path::PathBuf,
    },
}

/// `K/N` with 1 <= K <= N.
fn parse_shard(s: &str) -> Result<(usize, usize), String> {
    let bad = || format!("`{s}` is not a shard: write K/N with 1 <= K <= N, e.g. 2/3");
    let (k, n) = s.split_once('/').ok_or_else(bad)?;
    let (k, n): (usize, usize) = (k.trim().parse().map_err(|_| bad())?, n.trim().parse().map_err(|_| bad())?);
    if k == 0 || n == 0 || k > n {
        return Err(bad());
    }
    Ok((k, n))
}

#[derive(Subcommand)]
enum ImagesAction {
    /// Build every image whose inputs changed (reuses the others); prints each reference.
    Build,
}

/// Completes on Ctrl-C or SIGTERM.
async fn terminated() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        Some(()) = async { match term.as_mut() { Some(t) => t.recv().await, None => std::future::pending().await } } => {}
    }
}

/// The longest `--max-duration`: a week.
const MAX_DURATION_S: u64 = 7 * 24 * 3600;

/// Parses `500ms`, `90s`, `15m`, `2h` (a bare number is seconds), from 1 ms to a week.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (n, unit) = t.split_at(split);
    let n: u64 = n.parse().map_err(|_| format!("`{text}` is not a duration; write e.g. 90s, 15m or 2h"))?;
    let ms = match unit {
        "ms" => Some(n),
        "" | "s" => n.checked_mul(1000),
        "m" => n.checked_mul(60_000),
        "h" => n.checked_mul(3_600_000),
        other => return Err(format!("unknown unit `{other}` in `{text}`; use ms, s, m or h")),
    };
    match ms {
        Some(ms) if (1..=MAX_DURATION_S * 1000).contains(&ms) => Ok(Duration::from_millis(ms)),
        _ => Err(format!("`{text}` is outside 1ms to {}h", MAX_DURATION_S / 3600)),
    }
}

/// The Redis password of an environment to attach to.
fn attach_password(run_id: &str, file: Option<&std::path::Path>) -> anyhow::Result<String> {
    let default = leasequake::env::password_file(run_id);
    let from_file = |f: &std::path::Path| -> anyhow::Result<String> {
        Ok(std::fs::read_to_string(f)
            .with_context(|| format!("cannot read the Redis password file {}", f.display()))?
            .trim()
            .to_owned())
    };
    match file {
        Some(f) => from_file(f),
        None if default.exists() => from_file(&default),
        None => std::env::var("LEASEQUAKE_REDIS_PASSWORD").map_err(|_| {
            anyhow::anyhow!(
                "no Redis password for environment {run_id}: {} does not exist (is it an `env up` run id?). Fix: \
                 pass --redis-password-file, or set LEASEQUAKE_REDIS_PASSWORD (docker-compose.yml: leasequake-dev \
                 unless you set REDIS_PASSWORD)",
                default.display()
            )
        }),
    }
}

/// `leasequake run`: every scenario (times `repeat`), one line each, the exit code of the whole.
async fn run_scenarios(
    paths: &[std::path::PathBuf],
    report_dir: &std::path::Path,
    opts: &leasequake::run::RunOptions,
    repeat: u32,
    max_duration: Option<Duration>,
    shard: Option<(usize, usize)>,
) -> anyhow::Result<ExitCode> {
    let mut files = leasequake::scenario::discover(paths);
    if let Some((k, n)) = shard {
        let all = files.len();
        files = leasequake::scenario::shard(files, k, n);
        eprintln!("shard {k}/{n}: {} of {all} scenario files", files.len());
        if files.is_empty() {
            println!("shard {k}/{n} has no scenario files (only {all} in all): nothing to run");
            return Ok(ExitCode::SUCCESS);
        }
    }
    let mut scenarios = Vec::new();
    for f in &files {
        match leasequake::scenario::load(f) {
            Ok(sc) => scenarios.push((f.clone(), sc)),
            Err(e) => {
                eprintln!("error: {e}");
                return Ok(exit::usage());
            }
        }
    }
    if scenarios.is_empty() {
        eprintln!("error: no scenario files (*.toml) under {paths:?}");
        return Ok(exit::usage());
    }
    // A shard's runs are tallied by the parent that merges them.
    let tally = repeat > 1 && shard.is_none();
    run_loaded(scenarios, report_dir, opts, repeat, max_duration, tally).await
}

/// `run --parallel N`: N child runs of this binary over the shards, their output prefixed, then
/// one merged suite. The images are ensured first, so that the children only reuse them.
async fn run_parallel(
    paths: &[std::path::PathBuf],
    report_dir: &std::path::Path,
    n: u32,
    passed: &[String],
) -> anyhow::Result<ExitCode> {
    use tokio::io::AsyncBufReadExt;
    for f in &leasequake::scenario::discover(paths) {
        if let Err(e) = leasequake::scenario::load(f) {
            eprintln!("error: {e}");
            return Ok(exit::usage());
        }
    }
    let docker = leasequake::docker::connect().await?;
    for spec in [
        leasequake::image::ImageSpec::redis()?,
        leasequake::image::ImageSpec::proxy()?,
        leasequake::image::ImageSpec::store()?,
    ] {
        leasequake::image::ensure(&docker, &spec).await?;
    }
    let work = report_dir.join(format!(".parallel-{}", std::process::id()));
    let exe = std::env::current_exe()?;
    let mut children = Vec::new();
    let mut pumps = Vec::new();
    for k in 1..=n {
        let dir = work.join(k.to_string());
        let mut cmd = tokio::process::Command::new(&exe);
        cmd.arg("run")
            .args(paths)
            .args(["--shard", &format!("{k}/{n}"), "--report-dir"])
            .arg(&dir)
            .args(passed)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = cmd.spawn()?;
        for stream in [
            child.stdout.take().map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Unpin + Send>),
            child.stderr.take().map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Unpin + Send>),
        ]
        .into_iter()
        .flatten()
        {
            let prefix = format!("[{k}/{n}] ");
            pumps.push(tokio::spawn(async move {
                let mut lines = tokio::io::BufReader::new(stream).lines();
                // Bounded by the child: its pipe closes when it exits.
                while let Ok(Some(line)) = lines.next_line().await {
                    if !line.starts_with("report: ") {
                        println!("{prefix}{line}");
                    }
                }
            }));
        }
        children.push((dir, child));
    }
    // SIGTERM reaches only this process: pass it on, so every child heals and cleans up.
    let pids: Vec<u32> = children.iter().filter_map(|(_, c)| c.id()).collect();
    let forward = tokio::spawn(async move {
        terminated().await;
        for pid in pids {
            if let Some(p) = rustix::process::Pid::from_raw(pid as i32) {
                let _ = rustix::process::kill_process(p, rustix::process::Signal::TERM);
            }
        }
    });
    let mut codes = Vec::new();
    let mut suites = Vec::new();
    for (dir, mut child) in children {
        codes.push(child.wait().await?.code());
        if let Ok(latest) = std::fs::canonicalize(dir.join("latest")) {
            suites.push(latest);
        }
    }
    forward.abort();
    for p in pumps {
        let _ = p.await;
    }
    if codes.contains(&Some(2)) {
        return Ok(exit::usage());
    }
    let (page, verdict) = match leasequake::report::SuiteDir::merge(report_dir, &suites) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("error: cannot merge the parallel runs' suites: {e}");
            return Ok(exit::inconclusive());
        }
    };
    // Per scenario, what the runs concluded (a soak reads this).
    let merged = std::fs::read(report_dir.join("latest").join("summary.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<leasequake_reports::suite::Suite>(&b).ok());
    if let Some(suite) = merged {
        print!("{}", suite.tally());
    }
    println!(
        "{n} runs in parallel, merged: {} (each run's own suite stays under {})",
        format!("{verdict:?}").to_uppercase(),
        work.display()
    );
    println!("report: {}", page.display());
    Ok(exit::verdict(verdict))
}

/// The suite's wall time at parallelism 1 and 2 (child runs of this binary), with the verdicts.
async fn suite_figures(paths: &[std::path::PathBuf]) -> anyhow::Result<Vec<leasequake::bench::Figure>> {
    let files = leasequake::scenario::discover(paths).len();
    let dir = std::env::temp_dir().join(format!("leasequake-bench-suite-{}", std::process::id()));
    let mut out = Vec::new();
    for parallel in [1u32, 2] {
        let started = std::time::Instant::now();
        let run = tokio::process::Command::new(std::env::current_exe()?)
            .arg("run")
            .args(paths)
            .args(["--parallel", &parallel.to_string(), "--report-dir"])
            .arg(dir.join(parallel.to_string()))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .await?;
        let took = started.elapsed().as_secs_f64() / 60.0;
        let verdict = std::fs::read(dir.join(parallel.to_string()).join("latest/summary.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .and_then(|v| v["verdict"].as_str().map(str::to_owned))
            .unwrap_or_else(|| "no summary".into());
        out.push(leasequake::bench::Figure {
            name: format!("suite of {files} scenario files, parallelism {parallel}"),
            value: took,
            unit: "min".into(),
            target: Some(8.0),
            note: format!("verdict {verdict} (exit {:?}); reports under {}", run.code(), dir.display()),
        });
    }
    Ok(out)
}

/// Runs loaded scenarios as one suite.
async fn run_loaded(
    scenarios: Vec<(std::path::PathBuf, leasequake::scenario::Scenario)>,
    report_dir: &std::path::Path,
    opts: &leasequake::run::RunOptions,
    repeat: u32,
    max_duration: Option<Duration>,
    tally: bool,
) -> anyhow::Result<ExitCode> {
    // Before anything starts: every node command can be started (a missing venv, a typo).
    for (file, s) in &scenarios {
        if let Some(cmd) = opts.node_cmd.as_ref().or(s.nodes.command.as_ref()) {
            if let Err(problem) = leasequake::run::startable(cmd) {
                eprintln!("error: {}: the node command cannot be started: {problem}", file.display());
                return Ok(exit::usage());
            }
        }
    }
    if let Some(a) = &opts.attach {
        // Before anything starts: the environment exists, answers, takes the password, and has
        // proxy ports for the largest scenario.
        let nodes = scenarios.iter().map(|(_, s)| s.nodes.count).max().unwrap_or(1);
        let docker = leasequake::docker::connect().await?;
        if let Err(e) = leasequake::env::Environment::attach(docker, &a.run_id, a.password.clone(), nodes).await {
            eprintln!("error: {e}");
            return Ok(exit::usage());
        }
    }
    let interrupt = interrupt_on_signal_or_after(max_duration);
    let total = scenarios.len() * repeat as usize;
    let mut suite = leasequake::report::SuiteDir::create(report_dir)?;
    let mut done = 0;
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
            let seed = leasequake::run::seed_for(sc, opts);
            let run = run_one(&mut suite, file, sc, seed, opts, &interrupt, &label).await;
            println!(
                "{:<13} {:<32} seed {:<20} {}  [{}]",
                run.shown().label(),
                sc.name,
                seed,
                escaped(&run.finding()),
                suite.dir().join(&run.dir).display()
            );
            if run.verdict() != leasequake_reports::Verdict::Pass {
                // A replay runs the same nodes only when told to on its command line.
                let nodes = opts.node_cmd.as_ref().or(sc.nodes.command.as_ref());
                let node_cmd = nodes.map(|c| format!(" --node-cmd \"{}\"", c.join(" "))).unwrap_or_default();
                println!(
                    "  repro: leasequake repro {}{node_cmd}   (or, from the scenario file: {})",
                    suite.dir().join(&run.dir).display(),
                    run.repro
                );
            }
        }
    }
    let stopped = interrupt.reason().map(|reason| {
        let skipped = total - done;
        println!("stopped: {reason}; {skipped} of {total} scenario runs not started");
        reason
    });
    let page = suite.finish(stopped)?;
    if tally {
        print!("{}", suite.tally());
    }
    println!("report: {}", page.display());
    Ok(exit::verdict(suite.verdict()))
}

/// An interrupt fired by Ctrl-C or SIGTERM, or when `max_duration` has passed.
fn interrupt_on_signal_or_after(max_duration: Option<Duration>) -> leasequake::run::Interrupt {
    let interrupt = leasequake::run::Interrupt::new();
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

/// `leasequake selftest`: see its help.
async fn selftest(
    report_dir: &std::path::Path,
    seeds: u32,
    first_seed: u64,
    only: &[String],
    flawed_node: Option<std::path::PathBuf>,
    max_duration: Option<Duration>,
) -> anyhow::Result<ExitCode> {
    use leasequake::selftest;
    let entries = match selftest::select(only) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(exit::usage());
        }
    };
    let root = std::path::PathBuf::from(".");
    if !root.join("scenarios/selftest").is_dir() {
        eprintln!("error: scenarios/selftest not found here: run the self-test from the checkout's root");
        return Ok(exit::usage());
    }
    let flawed = flawed_node.unwrap_or_else(|| "target/flawed/debug/leasequake".into());
    let flawed = match std::fs::canonicalize(&flawed) {
        Ok(p) if p.is_file() => p,
        _ => {
            eprintln!(
                "error: no self-test node at {}: build it with `cargo build -p leasequake --features flaws \
                 --target-dir target/flawed` (scripts/leasequake selftest does), or name it with --flawed-node",
                flawed.display()
            );
            return Ok(exit::usage());
        }
    };
    let interrupt = interrupt_on_signal_or_after(max_duration);
    let mut suite = leasequake::report::SuiteDir::create(report_dir)?;
    let variants_dir = suite.dir().join("selftest-scenarios");
    let mut plan: Vec<(Option<usize>, std::path::PathBuf)> = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        plan.push((Some(i), selftest::write_variant(&root, e, &flawed, &variants_dir)?));
    }
    let controls = selftest::controls(&entries);
    let mut loaded = Vec::new();
    for (entry, file) in plan.into_iter().chain(controls.iter().map(|c| (None, std::path::PathBuf::from(c)))) {
        match leasequake::scenario::load(&file) {
            Ok(s) => loaded.push((entry, file, s)),
            Err(e) => {
                eprintln!("error: {e}");
                return Ok(exit::usage());
            }
        }
    }
    let seeds: Vec<u64> = (0..u64::from(seeds)).map(|k| first_seed + k).collect();
    let opts = leasequake::run::RunOptions {
        seed: None,
        node_cmd: None,
        attach: None,
        progress: leasequake::progress::Progress::stderr(),
    };
    let total = seeds.len() * loaded.len();
    let mut done = 0;
    let mut results: Vec<(Option<usize>, std::path::PathBuf, leasequake_reports::suite::ScenarioRun)> = Vec::new();
    // Seed by seed, so that a run cut short by --max-duration still covers every entry.
    'all: for seed in &seeds {
        for (entry, file, sc) in &loaded {
            if interrupt.fired() {
                break 'all;
            }
            done += 1;
            let what = entry.map_or_else(|| "control".to_owned(), |i| entries[i].name.to_owned());
            let label = format!("[{done}/{total}] {what} seed {seed}");
            let run = run_one(&mut suite, file, sc, *seed, &opts, &interrupt, &label).await;
            let line = match entry {
                Some(i) => {
                    let c = selftest::Caught::of(&run, suite.dir());
                    let said = if c.caught_by(entries[*i].expect) {
                        format!("caught by {}", c.by.join(", "))
                    } else if !c.by.is_empty() {
                        format!("not caught by {} (only by {})", entries[*i].expect.unwrap_or("-"), c.by.join(", "))
                    } else if c.inconclusive {
                        format!("inconclusive: {}", run.finding())
                    } else {
                        "not caught".into()
                    };
                    format!("{:<32} seed {seed:<4} {said}", what)
                }
                None => format!(
                    "{:<32} seed {seed:<4} {} {}",
                    format!("control {}", sc.name),
                    run.shown().label(),
                    run.finding()
                ),
            };
            println!("{line}  [{}]", suite.dir().join(&run.dir).display());
            results.push((*entry, file.clone(), run));
        }
    }
    let rows: Vec<selftest::Row> = entries
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let runs = results
                .iter()
                .filter(|(entry, _, _)| *entry == Some(i))
                .map(|(_, _, r)| selftest::Caught::of(r, suite.dir()))
                .collect();
            let control: Vec<&leasequake_reports::suite::ScenarioRun> = results
                .iter()
                .filter(|(entry, file, _)| entry.is_none() && file.as_path() == std::path::Path::new(e.control))
                .map(|(_, _, r)| r)
                .collect();
            selftest::row(e, runs, &control)
        })
        .collect();
    let table = selftest::markdown(&rows, &seeds);
    println!("\n{table}");
    std::fs::write(suite.dir().join("selftest.md"), &table)?;
    std::fs::write(suite.dir().join("selftest.json"), serde_json::to_string_pretty(&rows)?)?;
    let stopped = interrupt.reason().map(|reason| {
        println!("stopped: {reason}; {} of {total} runs not started", total - done);
        reason
    });
    let page = suite.finish(stopped)?;
    println!("report: {}  (table: {})", page.display(), suite.dir().join("selftest.md").display());
    let code = match selftest::exit_code(&rows) {
        0 if interrupt.fired() => 3,
        c => c,
    };
    Ok(exit::code(code))
}

/// Why `dir` holds no history to judge or replay, naming the fix; `None` when it does.
fn no_history(dir: &std::path::Path) -> Option<String> {
    let file = dir.join(leasequake::history::HISTORY_FILE);
    if !dir.is_dir() {
        return Some(format!(
            "{} is not a directory: give a run directory, e.g. reports-out/latest/01-no-faults",
            dir.display()
        ));
    }
    (!file.is_file()).then(|| {
        format!(
            "{} has no {}: give a run directory (one per scenario run, inside a suite directory)",
            dir.display(),
            leasequake::history::HISTORY_FILE
        )
    })
}

/// Whether run directories can be written under `dir` (created if missing): else what is wrong.
fn usable_report_dir(dir: &std::path::Path) -> Result<(), String> {
    let fix = "choose another with --report-dir";
    if dir.exists() && !dir.is_dir() {
        return Err(format!("--report-dir {} is a file, not a directory: {fix}", dir.display()));
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("--report-dir {}: cannot create it ({e}): {fix}", dir.display()))?;
    let probe = dir.join(format!(".write-probe-{}", std::process::id()));
    std::fs::write(&probe, b"")
        .map_err(|e| format!("--report-dir {}: cannot write in it ({e}): {fix}", dir.display()))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// Why `dir` is no run directory `repro` can replay, naming the fix (a suite directory lists its
/// runs); `None` when it holds a scenario as run.
fn not_a_run_dir(dir: &std::path::Path) -> Option<String> {
    const SHOWN: usize = 8;
    if dir.join("scenario.toml").is_file() {
        return None;
    }
    if !dir.is_dir() {
        return Some(format!(
            "{} is not a directory: give a run directory, e.g. reports-out/latest/02-owner-cut-from-redis",
            dir.display()
        ));
    }
    let mut runs: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().join("scenario.toml").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    runs.sort();
    if runs.is_empty() {
        return Some(format!(
            "{} is not a run directory (it has no scenario.toml): give one, e.g. reports-out/latest/02-owner-cut-from-redis",
            dir.display()
        ));
    }
    let more = runs.len().saturating_sub(SHOWN);
    let listed: Vec<String> = runs.iter().take(SHOWN).map(|r| dir.join(r).display().to_string()).collect();
    Some(format!(
        "{} is a suite directory; `leasequake repro` replays one of its runs:\n  {}{}",
        dir.display(),
        listed.join("\n  "),
        if more > 0 { format!("\n  ... and {more} more") } else { String::new() }
    ))
}

/// Runs one scenario with `seed` into the suite's next run directory and records it in the suite.
async fn run_one(
    suite: &mut leasequake::report::SuiteDir,
    file: &std::path::Path,
    sc: &leasequake::scenario::Scenario,
    seed: u64,
    opts: &leasequake::run::RunOptions,
    interrupt: &leasequake::run::Interrupt,
    label: &str,
) -> leasequake_reports::suite::ScenarioRun {
    opts.progress.scenario(label, sc.faults.len());
    let ticker = tokio_util::sync::CancellationToken::new();
    let tick = tokio::spawn(opts.progress.clone().tick(ticker.clone()));
    let dir = suite.next_run_dir(&sc.name);
    let began = std::time::Instant::now();
    let outcome = leasequake::run::run(sc, seed, &dir, opts, interrupt).await;
    ticker.cancel();
    let _ = tick.await;
    opts.progress.clear();
    let _ = std::fs::copy(file, dir.join("scenario.toml"));
    let env = opts.attach.as_ref().map(|a| format!(" --env {}", a.run_id)).unwrap_or_default();
    let node_cmd = opts.node_cmd.as_ref().map(|c| format!(" --node-cmd \"{}\"", c.join(" "))).unwrap_or_default();
    let mut run = leasequake_reports::suite::ScenarioRun {
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
        repro: format!("leasequake run {} --seed {seed}{env}{node_cmd}", file.display()),
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
            Default::default()
        }
    };
    suite.add(run.clone(), &versions);
    run
}

/// The scenario's configuration as run, for summary.json.
fn scenario_config(
    s: &leasequake::scenario::Scenario,
    opts: &leasequake::run::RunOptions,
) -> std::collections::BTreeMap<String, String> {
    let mut c = std::collections::BTreeMap::new();
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

/// The snake_case name serde gives a value (a verdict, a status).
fn name(v: serde_json::Value) -> String {
    v.as_str().unwrap_or_default().to_owned()
}

fn main() -> ExitCode {
    {
        use tracing_subscriber::layer::SubscriberExt;
        use tracing_subscriber::util::SubscriberInitExt;
        use tracing_subscriber::Layer;
        let terminal = tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .with_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()));
        let run_log = tracing_subscriber::fmt::layer()
            .with_writer(leasequake::runlog::RunLog)
            .with_ansi(false)
            .with_filter(tracing_subscriber::EnvFilter::new("info"));
        tracing_subscriber::registry().with(terminal).with(run_log).init();
    }
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return exit::inconclusive();
        }
    };
    let code = match runtime.block_on(dispatch(cli.command)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            exit::inconclusive()
        }
    };
    // A node's stdin reader sits on a blocking thread that never returns by itself.
    runtime.shutdown_timeout(Duration::from_millis(200));
    code
}

/// The node variant `node --flaw NAME` asks for. A production build has no flaws to select.
fn node_variant(flaw: Option<&str>) -> anyhow::Result<leasequake::node::Variant> {
    let Some(name) = flaw else { return Ok(leasequake::node::Variant::reference()) };
    #[cfg(feature = "flaws")]
    {
        let Some(f) = redis_lease::Flaw::from_name(name) else {
            let known: Vec<&str> = redis_lease::Flaw::ALL.iter().map(|f| f.name()).collect();
            anyhow::bail!("unknown flaw {name:?}; known flaws: {}", known.join(", "));
        };
        Ok(leasequake::node::Variant {
            label: Some(format!("flaw: {}", f.name())),
            configure: Box::new(move |c| c.with_flaw(f)),
        })
    }
    #[cfg(not(feature = "flaws"))]
    anyhow::bail!(
        "this build cannot select flaws (asked for {name:?}); the self-test node is a separate build: \
         cargo build -p leasequake --features flaws --target-dir target/flawed"
    )
}

async fn dispatch(command: Command) -> anyhow::Result<ExitCode> {
    if cfg!(feature = "flaws") && !matches!(command, Command::Node { .. }) {
        anyhow::bail!(
            "this is the self-test build of the node (built with --features flaws): it only runs \
             `node --flaw NAME`; use the normal build (target/debug/leasequake) for everything else"
        );
    }
    match command {
        Command::Env { action: EnvAction::Down } => {
            let docker = leasequake::docker::connect().await?;
            leasequake::env::remove_origin(&docker, "env-up").await?;
            println!("removed every environment `env up` started");
            Ok(ExitCode::SUCCESS)
        }
        Command::Env { action: EnvAction::Up { nodes, down_after_ms, policy } } => {
            env_up_command(nodes, down_after_ms, policy).await
        }
        Command::Report { action: ReportAction::Merge { suites, report_dir } } => {
            if suites.is_empty() {
                eprintln!("error: name the suite directories to merge (each holds a summary.json)");
                return Ok(exit::usage());
            }
            match leasequake::report::SuiteDir::merge(&report_dir, &suites) {
                Ok((page, verdict)) => {
                    println!("merged {} suites: {}", suites.len(), format!("{verdict:?}").to_uppercase());
                    println!("report: {}", page.display());
                    Ok(exit::verdict(verdict))
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    Ok(exit::usage())
                }
            }
        }
        Command::Run(args) => run_command(args).await,
        Command::Bench { samples, out, checker_only, suite } => bench_command(samples, out, checker_only, suite).await,
        Command::Selftest { report_dir, seeds, first_seed, entries, flawed_node, max_duration } => {
            selftest_command(report_dir, seeds, first_seed, entries, flawed_node, max_duration).await
        }
        Command::Repro { dir, report_dir, node_cmd, run_recorded_command } => {
            repro_command(dir, report_dir, node_cmd, run_recorded_command).await
        }
        Command::List { paths } => list_command(paths).await,
        Command::Doctor => doctor_command().await,
        Command::Clean { images } => clean_command(images).await,
        Command::Check { dir } => check_command(dir).await,
        Command::Node { flaw } => node_command(flaw).await,
        Command::VectorStore { listen, policy, audit_file } => vector_store_command(listen, policy, audit_file).await,
        Command::Images { action: ImagesAction::Build } => {
            use leasequake::image::{ensure, ImageSpec};
            let docker = leasequake::docker::connect().await?;
            for spec in [ImageSpec::redis()?, ImageSpec::proxy()?, ImageSpec::store()?] {
                let built = ensure(&docker, &spec).await?;
                let what = if built.rebuilt { "built" } else { "unchanged, reused" };
                println!(
                    "{}  {what} in {:.2} s  (also tagged {})",
                    built.reference,
                    built.took.as_secs_f64(),
                    built.stable
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Demo(args) => demo_command(args).await,
    }
}

async fn env_up_command(nodes: u32, down_after_ms: u64, policy: PolicyArg) -> anyhow::Result<ExitCode> {
    use leasequake::image::{ensure, resolve, ImageSpec};
    let docker = leasequake::docker::connect().await?;
    let cfg = leasequake::env::EnvConfig {
        nodes,
        down_after_ms,
        failover_timeout_ms: down_after_ms * 3,
        ready_timeout: Duration::from_secs(60),
        origin: "env-up",
        store_policy: policy.into(),
        redis_image: resolve(&docker, "LEASEQUAKE_REDIS_IMAGE", ImageSpec::redis).await?,
        proxy_image: resolve(&docker, "LEASEQUAKE_PROXY_IMAGE", ImageSpec::proxy).await?,
        store_image: ensure(&docker, &ImageSpec::store()?).await?,
    };
    let env = leasequake::env::Environment::up(docker, &cfg).await?;
    let secret = leasequake::env::password_file(&env.run_id);
    {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new().create(true).write(true).truncate(true).mode(0o600).open(&secret)?;
        f.write_all(env.redis_password().as_bytes())?;
    }
    let r = env.run_id.clone();
    println!("environment {r} ready in {:.2} s", env.ready_in.as_secs_f64());
    println!("  fault proxy API   http://{}   (Toxiproxy API; e.g. curl {}/proxies)", env.proxy_api, env.proxy_api);
    println!("  vector store      http://{}   (GET /v1/tenants/T, GET /v1/audit)", env.store_addr);
    let ports: Vec<String> = env
        .proxy_ports
        .iter()
        .enumerate()
        .map(|(i, p)| format!("{}->127.0.0.1:{p}", leasequake::env::PROXY_PORT_BASE as usize + i))
        .collect();
    println!("  proxy port block  {}   (create proxies listening on 0.0.0.0:<container port>)", ports.join(" "));
    println!("  redis             upstream names redis-primary:6379, redis-replica:6379 (client network)");
    println!("  redis-cli         docker exec -it lq-{r}-redis-primary redis-cli -a \"$(cat {})\"", secret.display());
    println!("  sentinel          docker exec -it lq-{r}-sentinel-1 redis-cli -p 26379 sentinel masters");
    println!("  run a scenario    leasequake run --env {r} scenarios/smoke/no-faults.toml");
    println!("Ctrl-C removes it.");
    terminated().await;
    let _ = std::fs::remove_file(&secret);
    env.down().await?;
    println!("removed environment {r}");
    Ok(ExitCode::SUCCESS)
}

async fn run_command(args: RunArgs) -> anyhow::Result<ExitCode> {
    let RunArgs {
        paths,
        seed,
        report_dir,
        repeat,
        max_duration,
        node_cmd,
        env_id,
        redis_password_file,
        shard,
        parallel,
    } = args;
    if let Err(problem) = usable_report_dir(&report_dir) {
        eprintln!("error: {problem}");
        return Ok(exit::usage());
    }
    if parallel > 1 {
        let mut passed: Vec<String> = Vec::new();
        if let Some(s) = seed {
            passed.extend(["--seed".into(), s.to_string()]);
        }
        if repeat > 1 {
            passed.extend(["--repeat".into(), repeat.to_string()]);
        }
        if let Some(c) = node_cmd {
            passed.extend(["--node-cmd".into(), c]);
        }
        if let Some(d) = max_duration {
            passed.extend(["--max-duration".into(), format!("{}ms", d.as_millis())]);
        }
        return run_parallel(&paths, &report_dir, parallel, &passed).await;
    }
    let attach = match env_id {
        None => None,
        Some(run_id) => {
            let password = match attach_password(&run_id, redis_password_file.as_deref()) {
                Ok(p) => p,
                Err(e) => {
                    eprintln!("error: {e}");
                    return Ok(exit::usage());
                }
            };
            Some(leasequake::run::Attach { run_id, password })
        }
    };
    let opts = leasequake::run::RunOptions {
        seed,
        node_cmd: node_cmd.map(|c| c.split_whitespace().map(str::to_owned).collect()),
        attach,
        progress: leasequake::progress::Progress::stderr(),
    };
    run_scenarios(&paths, &report_dir, &opts, repeat, max_duration, shard).await
}

async fn bench_command(
    samples: usize,
    out: std::path::PathBuf,
    checker_only: bool,
    suite: Vec<std::path::PathBuf>,
) -> anyhow::Result<ExitCode> {
    let mut figures = if checker_only {
        leasequake::bench::checker_figures(1_000_000)
    } else {
        match leasequake::bench::run(samples.max(1)).await {
            Ok(f) => f,
            Err(e) => {
                eprintln!("error: {e}");
                return Ok(exit::inconclusive());
            }
        }
    };
    if !suite.is_empty() {
        figures.extend(suite_figures(&suite).await?);
    }
    print!("{}", leasequake::bench::table(&figures));
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let json = serde_json::json!({
        "utc": leasequake::report::utc(
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
        ),
        "figures": figures,
    });
    std::fs::write(&out, serde_json::to_vec_pretty(&json)?)?;
    println!("written to {}", out.display());
    Ok(ExitCode::SUCCESS)
}

async fn selftest_command(
    report_dir: std::path::PathBuf,
    seeds: u32,
    first_seed: u64,
    entries: Vec<String>,
    flawed_node: Option<std::path::PathBuf>,
    max_duration: Option<Duration>,
) -> anyhow::Result<ExitCode> {
    if let Err(problem) = usable_report_dir(&report_dir) {
        eprintln!("error: {problem}");
        return Ok(exit::usage());
    }
    selftest(&report_dir, seeds, first_seed, &entries, flawed_node, max_duration).await
}

async fn repro_command(
    dir: std::path::PathBuf,
    report_dir: std::path::PathBuf,
    node_cmd: Option<String>,
    run_recorded_command: bool,
) -> anyhow::Result<ExitCode> {
    if let Some(problem) = not_a_run_dir(&dir).or_else(|| no_history(&dir)) {
        eprintln!("error: {problem}");
        return Ok(exit::usage());
    }
    if let Err(problem) = usable_report_dir(&report_dir) {
        eprintln!("error: {problem}");
        return Ok(exit::usage());
    }
    let mut scenario = match leasequake::scenario::replay(&dir) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(exit::usage());
        }
    };
    let Some(h) = leasequake::history::read_header(&dir.join(leasequake::history::HISTORY_FILE))? else {
        eprintln!("error: {} has no history header: not a run directory", dir.display());
        return Ok(exit::usage());
    };
    // The nodes that ran (`--node-cmd`, the self-test's flawed build), not this harness's:
    // run only as the user says, never because a file says so.
    let recorded = h.node_command.clone().or_else(|| scenario.nodes.command.take());
    let node_cmd = match (node_cmd, recorded) {
        (Some(c), _) => Some(c.split_whitespace().map(str::to_owned).collect()),
        (None, Some(c)) if run_recorded_command => Some(c),
        (None, Some(c)) => {
            eprintln!(
                "error: this run's nodes were started by a recorded command:\n  {}\nrepro does not run a \
                 command read from a file. Pass it yourself:\n  leasequake repro {} --node-cmd \"{}\"\n\
                 or confirm the recorded one with --run-recorded-command",
                printable(&c.join(" ")),
                dir.display(),
                printable(&c.join(" ")),
            );
            return Ok(exit::usage());
        }
        (None, None) => None,
    };
    let opts = leasequake::run::RunOptions {
        seed: Some(h.seed),
        node_cmd,
        attach: None,
        progress: leasequake::progress::Progress::stderr(),
    };
    let nodes = h.node_command.as_ref().map(|c| format!(", nodes `{}`", c.join(" "))).unwrap_or_default();
    eprintln!(
        "replaying {} with seed {} and its {} recorded faults{nodes}",
        scenario.name,
        h.seed,
        scenario.faults.len()
    );
    run_loaded(vec![(dir.join("scenario.toml"), scenario)], &report_dir, &opts, 1, None, false).await
}

async fn list_command(paths: Vec<std::path::PathBuf>) -> anyhow::Result<ExitCode> {
    let paths = if paths.is_empty() { vec![std::path::PathBuf::from("scenarios")] } else { paths };
    let files = leasequake::scenario::discover(&paths);
    if files.is_empty() {
        eprintln!("no scenario files (*.toml) under {paths:?}");
        return Ok(exit::usage());
    }
    let mut bad = 0;
    for f in files {
        match leasequake::scenario::load(&f) {
            Ok(s) => println!("{:<32} {}", s.name, escaped(&s.description)),
            Err(e) => {
                eprintln!("error: {e}");
                bad += 1;
            }
        }
    }
    Ok(if bad == 0 { ExitCode::SUCCESS } else { exit::usage() })
}

async fn doctor_command() -> anyhow::Result<ExitCode> {
    let findings = leasequake::doctor::run().await;
    for f in &findings {
        match &f.problem {
            None => println!("ok    {:<13} {}", f.check, f.detail),
            Some(p) => println!("FIX   {:<13} {p}", f.check),
        }
    }
    let problems = findings.iter().filter(|f| f.problem.is_some()).count();
    println!(
        "{}",
        if problems == 0 {
            "everything a run needs is here".to_owned()
        } else {
            format!("{problems} problem(s) to fix")
        }
    );
    Ok(if problems == 0 { ExitCode::SUCCESS } else { exit::failed() })
}

async fn clean_command(images: bool) -> anyhow::Result<ExitCode> {
    let docker = leasequake::docker::connect().await?;
    leasequake::env::remove_labelled(&docker, None, false).await?;
    println!("removed every labelled container and network");
    if images {
        let n = leasequake::image::remove_all(&docker).await?;
        println!("removed {n} image tags");
    }
    Ok(ExitCode::SUCCESS)
}

async fn check_command(dir: std::path::PathBuf) -> anyhow::Result<ExitCode> {
    if let Some(problem) = no_history(&dir) {
        eprintln!("error: {problem}");
        return Ok(exit::usage());
    }
    let r = leasequake::history::check_dir(&dir)?;
    for p in &r.properties {
        println!("{:<15} {:<15} {}", p.name, name(serde_json::to_value(p.status)?), escaped(&p.sentence));
    }
    for why in &r.inconclusive {
        println!("inconclusive: {why}");
    }
    for note in &r.notes {
        println!("note: {note}");
    }
    if let Some(e) = r.expectation {
        println!("expectation: {}", name(serde_json::to_value(e)?));
    }
    println!(
        "verdict: {}  (written to {})",
        format!("{:?}", r.verdict).to_uppercase(),
        dir.join(leasequake::history::VERDICTS_FILE).display()
    );
    Ok(exit::verdict(r.verdict))
}

async fn node_command(flaw: Option<String>) -> anyhow::Result<ExitCode> {
    let variant = node_variant(flaw.as_deref())?;
    leasequake::node::run_variant(tokio::io::stdin(), tokio::io::stdout(), variant).await?;
    Ok(ExitCode::SUCCESS)
}

async fn vector_store_command(
    listen: String,
    policy: PolicyArg,
    audit_file: Option<std::path::PathBuf>,
) -> anyhow::Result<ExitCode> {
    let policy: StorePolicy = policy.into();
    let listener = tokio::net::TcpListener::bind(&listen)
        .await
        .with_context(|| format!("cannot listen on {listen} (port in use? choose another with --listen)"))?;
    let store = std::sync::Arc::new(
        leasequake::store::Store::new(policy, audit_file.as_deref()).context("cannot create the audit file")?,
    );
    eprintln!("vector store listening on {}", listener.local_addr()?);
    let cancel = CancellationToken::new();
    let stop = cancel.clone();
    tokio::spawn(async move {
        terminated().await;
        stop.cancel();
    });
    leasequake::store::serve(listener, store, cancel).await;
    Ok(ExitCode::SUCCESS)
}

async fn demo_command(args: DemoArgs) -> anyhow::Result<ExitCode> {
    let DemoArgs { redis, nodes, node_cmd, tenant, ttl_ms, seconds, policy, store_fences } = args;
    let local = match redis {
        Some(_) => None,
        None => Some(LocalRedis::start().await?),
    };
    let redis_url = redis.or_else(|| local.as_ref().map(LocalRedis::url)).context("no Redis")?;
    let node_cmd = match node_cmd {
        Some(cmd) => cmd.split_whitespace().map(str::to_owned).collect(),
        None => vec![std::env::current_exe()?.display().to_string(), "node".to_owned()],
    };
    let cancel = CancellationToken::new();
    let ctrl_c = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            ctrl_c.cancel();
        }
    });
    let cfg = DemoConfig {
        redis_url,
        node_cmd,
        nodes,
        tenant,
        ttl: Duration::from_millis(ttl_ms),
        duration: Duration::from_secs(seconds),
        policy: policy.into(),
        fence_source: if store_fences { FenceSource::Store } else { FenceSource::Redis },
    };
    println!("demo: {nodes} nodes (`{}`), tenant {}, ttl {ttl_ms} ms, {seconds} s", cfg.node_cmd.join(" "), cfg.tenant);
    let tally = demo::run(cfg, cancel).await;
    if let Some(local) = local {
        local.stop().await;
    }
    let t = tally?;
    for (node, syncs) in &t.syncs {
        let lost = t.lost_rounds.get(node).copied().unwrap_or(0);
        let other = t.other_aborts.get(node).copied().unwrap_or(0);
        println!("{node}  {syncs} syncs finished, {lost} rounds aborted by ownership loss, {other} by other failures");
    }
    println!(
        "store: {} audit records; {} acknowledged writes, {} missing from the audit log; {} unreadable node lines",
        t.audit_records,
        t.acked,
        t.unaccounted.len(),
        t.garbage
    );
    let rising = t.alias_fences.windows(2).all(|w| w[0] < w[1]);
    println!(
        "alias switched {} times, fences {}",
        t.alias_fences.len(),
        if rising { "strictly rising" } else { "NOT RISING" }
    );
    println!("{}", if t.healthy() { "OK: every write accounted for" } else { "NOT OK" });
    Ok(if t.garbage > 0 {
        exit::inconclusive()
    } else if t.healthy() {
        ExitCode::SUCCESS
    } else {
        exit::failed()
    })
}
