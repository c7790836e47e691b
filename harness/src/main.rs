//! The `leasequake` command line.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use leasequake::demo::{self, DemoConfig};
use leasequake::error::HarnessError;
use leasequake::exit::Exit;
use leasequake::json_output::JsonOut;
use leasequake::local_redis::LocalRedis;
use leasequake::{selftest, suite};
use leasequake_reports::escaped;
use leasequake_reports::history::{FenceSource, StorePolicy};
use tokio_util::sync::CancellationToken;

#[derive(Parser)]
#[command(name = "leasequake", version, about = "Proves a Redis-leased job never lets a stale node write")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The chaos environment by hand: `env up` starts one and prints its addresses until Ctrl-C;
    /// `env down` removes what `env up` started (from another terminal, or after a crash). Exit 0
    /// done, 2 bad input, 3 Docker failed or could not be reached (the error says which).
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
    /// into one suite with one summary.json, junit.xml, summary.md and report.html. Exit as the
    /// merged suite's verdict (0, 1 a check failed, 3 inconclusive); 2 a shard that is no suite or
    /// names a run outside itself.
    Report {
        #[command(subcommand)]
        action: ReportAction,
    },
    /// Re-run a recorded run exactly: its scenario as run, its seed, its nodes and its schedule
    /// as executed (the same faults on the same nodes at the same times, random draws replaced by
    /// what they resolved to; a triggered fault waits for the same event on the same node). Exit
    /// codes as for `run`.
    Repro(RecordedRun),
    /// Shrink a failing container run: re-run its recorded schedule (`--confirm` times; a failure
    /// that does not come back every time is reported as flaky with its rate, not shrunk), then
    /// delta debugging over repro: faults removed, shortened, aimed at the owner and moved earlier,
    /// each attempt a real run kept only if it fails the same property. Writes the smallest
    /// failing schedule as shrunk.toml (with its [origin]) and shrink.json beside every attempt's
    /// run. For nodes the simulation cannot run (any language). Exit 1 a failing schedule written,
    /// 2 bad input (not a failing run), 3 flaky, interrupted or nothing judged.
    Shrink {
        #[command(flatten)]
        run: RecordedRun,
        /// Wall time for the whole search (e.g. 20m); no attempt starts that would likely end
        /// past it.
        #[arg(long, default_value = "20m", value_parser = parse_duration)]
        budget: Duration,
        /// Runs of the recorded schedule before shrinking (0 to 10; 0 trusts the recorded run).
        #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(0..=10))]
        confirm: u32,
    },
    /// Measure the speed figures against their targets (images, environment start, fault effect
    /// times, checker and report on 1 M history lines), print them with their ratios and write
    /// them as JSON. Removes and rebuilds the images: refuses while another run's containers
    /// exist. `--checker-only` measures the checker and the report alone (no Docker). Exit 0
    /// measured, 2 bad input, 3 a figure could not be measured.
    Bench {
        /// Samples per fault figure.
        #[arg(long, default_value_t = 50)]
        samples: usize,
        /// Where the figures go (JSON).
        #[arg(long, default_value = "reports-out/bench.json")]
        out: std::path::PathBuf,
        /// No containers: only the checker, the report rendering and the simulation's speed.
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
        /// Run at most this many flaw findings of scenarios/found (in file-name order; all when
        /// absent). CI runs ten; the nightly runs all.
        #[arg(long, value_parser = clap::value_parser!(u32).range(0..=64))]
        found_limit: Option<u32>,
        /// Print one JSON document on stdout for scripts (the suite's summary.json with the self-test's rows); what a
        /// person reads goes to stderr.
        #[arg(long)]
        json: bool,
    },
    /// Run seeds in the deterministic simulation (docs/sim.md): the lease's and the reference
    /// node's real code on virtual time, model Redis and store, one seed deciding everything; a
    /// scenario file gives the configuration. Prints seeds/min and the verdict counts, keeps every
    /// failing seed (and one passing sample) with the command that replays it. Exit 0 all passed,
    /// 1 a seed failed, 2 bad input, 3 inconclusive or interrupted.
    Sim(SimArgs),
    /// List scenarios (files or directories) with their one-line descriptions; exit 0 when every
    /// one is valid, 2 if any is invalid, naming file, line and field.
    List {
        /// Scenario files or directories (default: scenarios/).
        paths: Vec<std::path::PathBuf>,
        /// Print one JSON document on stdout: every scenario with its file, name, description,
        /// faults and expected failure, or its error.
        #[arg(long)]
        json: bool,
    },
    /// Check the Docker engine, the address pool, the images, leftovers and tools; say what to fix.
    /// Exit 0 everything is here, 1 something to fix.
    Doctor,
    /// Remove every container and network the harness ever labelled (all runs); with --images, the
    /// images too. Exit 0 done, 3 Docker failed or could not be reached.
    Clean {
        #[arg(long)]
        images: bool,
    },
    /// Container images the harness runs, built locally from this checkout (no registry). Exit 0
    /// done, 2 bad input, 3 a build failed or Docker could not be reached.
    Images {
        #[command(subcommand)]
        action: ImagesAction,
    },
    /// Re-judge a recorded run: reads DIR/history.jsonl, rewrites DIR/verdicts.json, prints the
    /// verdict per property; exit 0 pass, 1 fail, 2 no history to read (none, or a link or not a
    /// regular file), 3 inconclusive.
    Check {
        /// The run directory.
        dir: std::path::PathBuf,
        /// Print the verdicts (as verdicts.json) as one JSON document on stdout.
        #[arg(long)]
        json: bool,
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

/// A recorded run to run again (`repro`, `shrink`).
#[derive(clap::Args)]
struct RecordedRun {
    /// A run directory (`reports-out/latest/02-owner-cut-from-redis`).
    dir: std::path::PathBuf,
    /// Where the new suite directory goes.
    #[arg(long, default_value = "reports-out")]
    report_dir: std::path::PathBuf,
    /// The node command to run. A command recorded in the run directory (its history header,
    /// its scenario's `[nodes] command`) is never run on its own: a downloaded artifact could
    /// name any program. Pass it here, or confirm it with --run-recorded-command.
    #[arg(long)]
    node_cmd: Option<String>,
    /// Run the node command recorded in the run directory (printed first).
    #[arg(long, conflicts_with = "node_cmd")]
    run_recorded_command: bool,
}

impl From<RecordedRun> for suite::repro::Request {
    fn from(r: RecordedRun) -> Self {
        Self {
            dir: r.dir,
            report_dir: r.report_dir,
            node_cmd: r.node_cmd,
            run_recorded_command: r.run_recorded_command,
        }
    }
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
struct SimArgs {
    /// Run this many seeds (FIRST-SEED, FIRST-SEED+1, ...).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=1_000_000_000), conflicts_with = "seed")]
    seeds: u64,
    /// Run this one seed (prints its history's hash; a replay).
    #[arg(long)]
    seed: Option<u64>,
    /// The first seed of --seeds.
    #[arg(long, default_value_t = 1)]
    first_seed: u64,
    /// The scenario whose configuration the seeds run (default scenarios/sim/recommended.toml).
    #[arg(long)]
    scenario: Option<std::path::PathBuf>,
    /// Virtual seconds per seed.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(5..=3600))]
    virtual_s: u64,
    /// Node processes contending for the lease (default: the scenario's `[nodes] count`).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=16))]
    nodes: Option<u32>,
    /// Worker threads (default: one per core).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=64))]
    workers: Option<u64>,
    /// Where kept seeds go.
    #[arg(long, default_value = "reports-out")]
    report_dir: std::path::PathBuf,
    /// Run a flawed lease (the self-test build only: target/flawed/debug/leasequake).
    #[arg(long)]
    flaw: Option<String>,
    /// Stop at the first failing seed (the smallest: the seeds before it finish, none after it
    /// starts; printed as `first failure: seed S`).
    #[arg(long)]
    first_failure: bool,
    /// Print every seed's history hash (`sort` two runs' lines and compare them).
    #[arg(long)]
    print_hashes: bool,
    /// With --seed: shrink the failing seed's schedule and write it as a scenario file for
    /// containers (checked by running the file in the simulation again).
    #[arg(long, requires = "seed", value_name = "FILE.toml")]
    export: Option<std::path::PathBuf>,
    /// With --export: write the schedule as drawn, not shrunk.
    #[arg(long, requires = "export")]
    no_shrink: bool,
    /// With --export or --export-findings: declare the correct lease's finding a hazard of the
    /// configuration (written with `[expected]`: containers must fail it too). Without it the
    /// export is a plain scenario the correct lease must pass.
    #[arg(long, conflicts_with = "flaw")]
    as_hazard: bool,
    /// With --seeds: shrink each failing seed's schedule (at most 10) and write it beside its
    /// history as `shrunk.toml`, a scenario for containers.
    #[arg(long, conflicts_with = "seed")]
    export_findings: bool,
    /// With --seeds: end the batch after this long (e.g. 5m), a planned end judged by the seeds
    /// run (Ctrl-C is not: it reads inconclusive).
    #[arg(long, value_parser = parse_duration, conflicts_with = "seed")]
    time_box: Option<Duration>,
    /// Print which fault cells the seeds exercised (fault kind x the target's phase when it
    /// began x owner or not); summary.json holds the table anyway.
    #[arg(long)]
    coverage: bool,
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
    /// Print one JSON document on stdout for scripts (the suite's summary.json, with
    /// `suite_dir`); what a person reads goes to stderr.
    #[arg(long)]
    json: bool,
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

/// The snake_case name serde gives a value (a verdict, a status).
fn name(v: serde_json::Value) -> String {
    v.as_str().unwrap_or_default().to_owned()
}

/// A reader that went away (`leasequake list | head -1`) ends the command quietly, exit 0, as
/// `cat` does: Rust's print macros panic on a closed pipe (EPIPE), and that panic is this one.
fn quiet_on_a_closed_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let text = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if text.contains("failed printing to stdout") && text.contains("Broken pipe") {
            std::process::exit(0);
        }
        default(info);
    }));
}

fn main() -> ExitCode {
    {
        use tracing_subscriber::layer::SubscriberExt;
        use tracing_subscriber::util::SubscriberInitExt;
        use tracing_subscriber::Layer;
        let terminal = tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            // Colour only on a terminal, and never when NO_COLOR is set (no-color.org).
            .with_ansi(
                std::io::IsTerminal::is_terminal(&std::io::stderr())
                    && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
            )
            .with_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()));
        let run_log = tracing_subscriber::fmt::layer()
            .with_writer(leasequake::runlog::RunLog)
            .with_ansi(false)
            .with_filter(tracing_subscriber::EnvFilter::new("info"));
        tracing_subscriber::registry().with(terminal).with(run_log).init();
    }
    quiet_on_a_closed_pipe();
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(Exit::Inconclusive.code());
        }
    };
    // `run --json`, `selftest --json`, `check --json`: stdout points at stderr until the
    // document (the suite's summary, the run's verdicts) is written.
    let (json, verdicts_of) = match &cli.command {
        Command::Run(a) => (a.json, None),
        Command::Selftest { json, .. } => (*json, None),
        Command::Check { json, dir } => (*json, Some(dir.join(leasequake::history::VERDICTS_FILE))),
        _ => (false, None),
    };
    let out = match json.then(JsonOut::begin).transpose() {
        Ok(out) => out,
        Err(e) => {
            eprintln!("error: --json: cannot set stdout aside: {e}");
            return ExitCode::from(Exit::Inconclusive.code());
        }
    };
    let (exit, error) = match runtime.block_on(dispatch(cli.command)) {
        Ok(exit) => (exit, None),
        Err(e) => {
            eprintln!("error: {e:#}");
            (e.downcast_ref::<HarnessError>().map_or(Exit::Inconclusive, Exit::of_error), Some(format!("{e:#}")))
        }
    };
    if let Some(out) = out {
        let written = match verdicts_of {
            Some(file) => Some(leasequake::json_output::file_document(&file)),
            None => leasequake::report::last_written().map(|d| leasequake::json_output::suite_document(&d)),
        };
        let doc = match (error, written) {
            (None, Some(Ok(doc))) => doc,
            (None, Some(Err(e))) | (Some(e), _) => serde_json::json!({ "error": e, "exit": exit.code() }),
            (None, None) => serde_json::json!({ "error": "no suite was written", "exit": exit.code() }),
        };
        if let Err(e) = out.emit(&doc) {
            eprintln!("error: --json: cannot write the document: {e}");
        }
    }
    // A node's stdin reader sits on a blocking thread that never returns by itself.
    runtime.shutdown_timeout(Duration::from_millis(200));
    ExitCode::from(exit.code())
}

/// The node variant `node --flaw NAME` (or `sim --flaw NAME`) asks for. A production build has
/// no flaws to select: asking for one is a usage error naming the build that has them.
fn node_variant(flaw: Option<&str>) -> Result<leasequake::node::Variant, HarnessError> {
    let Some(name) = flaw else { return Ok(leasequake::node::Variant::reference()) };
    #[cfg(feature = "flaws")]
    {
        let Some(f) = redis_lease::Flaw::from_name(name) else {
            let known: Vec<&str> = redis_lease::Flaw::ALL.iter().map(|f| f.name()).collect();
            return Err(HarnessError::usage(format!("unknown flaw {name:?}; known flaws: {}", known.join(", "))));
        };
        Ok(leasequake::node::Variant {
            label: Some(format!("flaw: {}", f.name())),
            configure: Box::new(move |c| c.with_flaw(f)),
        })
    }
    #[cfg(not(feature = "flaws"))]
    Err(HarnessError::usage(format!(
        "this build cannot select flaws (asked for {name:?}); the self-test node is a separate build: \
         cargo build -p leasequake --features flaws --target-dir target/flawed"
    )))
}

async fn dispatch(command: Command) -> anyhow::Result<Exit> {
    if cfg!(feature = "flaws") && !matches!(command, Command::Node { .. } | Command::Sim(_)) {
        anyhow::bail!(
            "this is the self-test build of the node (built with --features flaws): it only runs \
             `node --flaw NAME` and `sim --flaw NAME`; use the normal build (target/debug/leasequake) for \
             everything else"
        );
    }
    match command {
        Command::Env { action: EnvAction::Down } => {
            let docker = leasequake::docker::connect().await?;
            leasequake::env::remove_origin(&docker, "env-up").await?;
            println!("removed every environment `env up` started");
            Ok(Exit::Passed)
        }
        Command::Env { action: EnvAction::Up { nodes, down_after_ms, policy } } => {
            env_up_command(nodes, down_after_ms, policy).await
        }
        Command::Report { action: ReportAction::Merge { suites, report_dir } } => {
            if suites.is_empty() {
                eprintln!("error: name the suite directories to merge (each holds a summary.json)");
                return Ok(Exit::Usage);
            }
            match leasequake::report::SuiteDir::merge(&report_dir, &suites) {
                Ok(m) => {
                    for d in &m.disagreed {
                        eprintln!("warning: {d}: the history's verdict stands");
                    }
                    println!("merged {} suites: {}", suites.len(), format!("{:?}", m.verdict).to_uppercase());
                    println!("report: {}", m.page.display());
                    Ok(m.verdict.into())
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    Ok(Exit::Usage)
                }
            }
        }
        Command::Run(args) => run_command(args).await,
        Command::Bench { samples, out, checker_only, suite } => bench_command(samples, out, checker_only, suite).await,
        Command::Selftest {
            report_dir,
            seeds,
            first_seed,
            entries,
            flawed_node,
            max_duration,
            found_limit,
            json: _,
        } => {
            let req = selftest::Request {
                report_dir,
                seeds,
                first_seed,
                only: entries,
                flawed_node,
                max_duration,
                found_limit: found_limit.map(|n| n as usize),
            };
            Ok(selftest::run(req).await?)
        }
        Command::Repro(run) => Ok(suite::repro::run(run.into()).await?),
        Command::Shrink { run, budget, confirm } => {
            let req = suite::shrink::Request { run: run.into(), budget, confirm };
            Ok(suite::shrink::run(req).await?)
        }
        Command::Sim(args) => sim_command(args).await,
        Command::List { paths, json } => list_command(paths, json).await,
        Command::Doctor => doctor_command().await,
        Command::Clean { images } => clean_command(images).await,
        Command::Check { dir, json: _ } => check_command(dir).await,
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
            Ok(Exit::Passed)
        }
        Command::Demo(args) => demo_command(args).await,
    }
}

async fn env_up_command(nodes: u32, down_after_ms: u64, policy: PolicyArg) -> anyhow::Result<Exit> {
    use leasequake::image::{ensure, resolve, ImageSpec};
    let docker = leasequake::docker::connect().await?;
    let cfg = leasequake::env::EnvConfig {
        nodes,
        down_after_ms,
        failover_timeout_ms: down_after_ms.saturating_mul(3),
        ready_timeout: Duration::from_secs(60),
        origin: "env-up",
        store_policy: policy.into(),
        redis_image: resolve(&docker, "LEASEQUAKE_REDIS_IMAGE", ImageSpec::redis).await?,
        proxy_image: resolve(&docker, "LEASEQUAKE_PROXY_IMAGE", ImageSpec::proxy).await?,
        store_image: ensure(&docker, &ImageSpec::store()?).await?,
    };
    let env = leasequake::env::Environment::up(docker, &cfg).await?;
    let secret = match leasequake::env::write_password_file(&env.run_id, env.redis_password()) {
        Ok(f) => f,
        Err(e) => {
            env.down().await?;
            return Err(e.into());
        }
    };
    let r = env.run_id.clone();
    println!("environment {r} ready in {:.2} s", env.ready_in.as_secs_f64());
    println!("  fault proxy API   http://{}   (Toxiproxy API; e.g. curl {}/proxies)", env.proxy_api, env.proxy_api);
    println!(
        "  vector store      http://{}   (GET /v1/tenants/T, GET /v1/audit; the model: POST /v1/embed)",
        env.store_addr
    );
    let ports: Vec<String> = env
        .proxy_ports
        .iter()
        .enumerate()
        .map(|(i, p)| format!("{}->127.0.0.1:{p}", leasequake::env::PROXY_PORT_BASE as usize + i))
        .collect();
    println!("  proxy port block  {}   (create proxies listening on 0.0.0.0:<container port>)", ports.join(" "));
    println!("  redis             upstream names redis-primary:6379, redis-replica:6379 (client network)");
    // The password through the environment (`-e NAME` passes it on): never on a command line.
    println!(
        "  redis-cli         REDISCLI_AUTH=\"$(cat {})\" docker exec -e REDISCLI_AUTH -it lq-{r}-redis-primary redis-cli",
        secret.display()
    );
    println!("  sentinel          docker exec -it lq-{r}-sentinel-1 redis-cli -p 26379 sentinel masters");
    println!(
        "  run a scenario    {}",
        leasequake::command_line::command(["run", "--env", r.as_str(), "scenarios/smoke/no-faults.toml"])
    );
    println!("Ctrl-C removes it.");
    suite::terminated().await;
    let _ = std::fs::remove_file(&secret);
    env.down().await?;
    println!("removed environment {r}");
    Ok(Exit::Passed)
}

async fn run_command(args: RunArgs) -> anyhow::Result<Exit> {
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
        json: _,
    } = args;
    let attach = env_id.map(|id| (id, redis_password_file));
    let req = suite::Request { paths, report_dir, seed, repeat, max_duration, node_cmd, attach, shard, parallel };
    Ok(suite::run(req).await?)
}

async fn bench_command(
    samples: usize,
    out: std::path::PathBuf,
    checker_only: bool,
    suite: Vec<std::path::PathBuf>,
) -> anyhow::Result<Exit> {
    let mut figures = if checker_only {
        let mut f = leasequake::bench::checker_figures(1_000_000);
        f.extend(leasequake::bench::sim_figures(Duration::from_secs(20)));
        f
    } else {
        match leasequake::bench::run(samples.max(1)).await {
            Ok(f) => f,
            Err(e) => {
                eprintln!("error: {e}");
                return Ok(Exit::Inconclusive);
            }
        }
    };
    if !suite.is_empty() {
        figures.extend(leasequake::bench::suite_figures(&suite).await?);
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
    Ok(Exit::Passed)
}

async fn sim_command(args: SimArgs) -> anyhow::Result<Exit> {
    let (first, count) = args.seed.map_or((args.first_seed, args.seeds), |s| (s, 1));
    if first.checked_add(count.saturating_sub(1)).is_none() {
        eprintln!(
            "error: --first-seed {first} with --seeds {count} runs past the largest seed ({}): seeds do not wrap to 0; \
             give fewer seeds or an earlier first seed",
            u64::MAX
        );
        return Ok(Exit::Usage);
    }
    let workers =
        args.workers.map_or_else(|| std::thread::available_parallelism().map_or(1, usize::from), |w| w as usize);
    let req = leasequake::sim::seeds::Request {
        scenario: args.scenario.unwrap_or_else(|| leasequake::sim::seeds::default_scenario().to_path_buf()),
        first,
        count,
        virtual_s: args.virtual_s,
        nodes: args.nodes,
        workers: workers.min(usize::try_from(count).unwrap_or(usize::MAX)),
        report_dir: args.report_dir,
        variant: std::sync::Arc::new(node_variant(args.flaw.as_deref())?),
        flaw: args.flaw,
        first_failure: args.first_failure,
        hashes: args.print_hashes,
        export: args.export,
        shrink: !args.no_shrink,
        hazard: args.as_hazard,
        export_findings: args.export_findings,
        time_box: args.time_box,
        coverage: args.coverage,
    };
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = stop.clone();
    tokio::spawn(async move {
        suite::terminated().await;
        flag.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    Ok(tokio::task::spawn_blocking(move || leasequake::sim::seeds::run(&req, &stop)).await??)
}

/// `list`'s folder when none is given: `scenarios/` here, else the checkout this binary was built
/// from; otherwise where it looked and what to type.
fn default_scenarios() -> Result<std::path::PathBuf, String> {
    let here = std::path::PathBuf::from("scenarios");
    let built = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    if here.is_dir() {
        return Ok(here);
    }
    if built.is_dir() {
        return Ok(built);
    }
    let cwd = std::env::current_dir().map(|d| d.join("scenarios").display().to_string()).unwrap_or_default();
    Err(format!(
        "no scenarios folder: looked in {cwd} and in the checkout it was built from ({}); name one: `leasequake list PATH`",
        built.display()
    ))
}

async fn list_command(paths: Vec<std::path::PathBuf>, json: bool) -> anyhow::Result<Exit> {
    let paths = if paths.is_empty() {
        match default_scenarios() {
            Ok(dir) => vec![dir],
            Err(message) => {
                eprintln!("error: {message}");
                return Ok(Exit::Usage);
            }
        }
    } else {
        paths
    };
    let files = leasequake::scenario::discover(&paths);
    if files.is_empty() {
        eprintln!("no scenario files (*.toml) under {paths:?}");
        if json {
            println!(
                "{}",
                serde_json::json!({ "error": format!("no scenario files (*.toml) under {paths:?}"), "exit": 2 })
            );
        }
        return Ok(Exit::Usage);
    }
    let mut bad = 0;
    let mut doc = Vec::new();
    let loaded: Vec<_> = files.iter().map(|f| (f, leasequake::scenario::load(f))).collect();
    // The name column fits the longest name (names are bounded by the scenario format).
    let width = loaded.iter().filter_map(|(_, s)| s.as_ref().ok()).map(|s| s.name.chars().count()).max().unwrap_or(0);
    for (f, loaded) in loaded {
        match loaded {
            Ok(s) if json => doc.push(serde_json::json!({
                "file": f.display().to_string(),
                "name": s.name,
                "description": s.description,
                "faults": s.faults.len(),
                "random": s.random.is_some(),
                "expected": s.expected_failure(),
            })),
            Ok(s) => println!("{:<width$} {}", s.name, escaped(&s.description)),
            Err(e) => {
                eprintln!("error: {e}");
                doc.push(serde_json::json!({ "file": f.display().to_string(), "error": e.to_string() }));
                bad += 1;
            }
        }
    }
    if let Err(e) = leasequake::suite::load_all(&files) {
        // Every file read; the names must be unique across them too.
        if bad == 0 {
            eprintln!("error: {e}");
            bad += 1;
        }
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&doc)?);
    }
    Ok(if bad == 0 { Exit::Passed } else { Exit::Usage })
}

async fn doctor_command() -> anyhow::Result<Exit> {
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
    Ok(if problems == 0 { Exit::Passed } else { Exit::Failed })
}

async fn clean_command(images: bool) -> anyhow::Result<Exit> {
    let docker = leasequake::docker::connect().await?;
    leasequake::env::remove_labelled(&docker, None, false).await?;
    println!("removed every labelled container and network");
    if images {
        let n = leasequake::image::remove_all(&docker).await?;
        println!("removed {n} image tags");
    }
    Ok(Exit::Passed)
}

async fn check_command(dir: std::path::PathBuf) -> anyhow::Result<Exit> {
    let r = leasequake::history::check_dir(&dir)?;
    let width = r.properties.iter().map(|p| p.name.len()).max().unwrap_or(0);
    for p in &r.properties {
        println!("{:<width$} {:<15} {}", p.name, name(serde_json::to_value(p.status)?), escaped(&p.sentence));
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
    Ok(r.verdict.into())
}

async fn node_command(flaw: Option<String>) -> anyhow::Result<Exit> {
    let variant = node_variant(flaw.as_deref())?;
    leasequake::node::run_variant(tokio::io::stdin(), tokio::io::stdout(), variant).await?;
    Ok(Exit::Passed)
}

async fn vector_store_command(
    listen: String,
    policy: PolicyArg,
    audit_file: Option<std::path::PathBuf>,
) -> anyhow::Result<Exit> {
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
        suite::terminated().await;
        stop.cancel();
    });
    leasequake::store::serve(listener, store, cancel).await;
    Ok(Exit::Passed)
}

async fn demo_command(args: DemoArgs) -> anyhow::Result<Exit> {
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
    let cfg_cmd = cfg.node_cmd.join(" ");
    println!("demo: {nodes} nodes (`{cfg_cmd}`), tenant {}, ttl {ttl_ms} ms, {seconds} s", cfg.tenant);
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
    for i in 1..=nodes {
        if !t.spoke.contains(&format!("n{i}")) {
            println!(
                "n{i} sent nothing: to see why, run the node command by hand (`{}`) and give it a config line \
                 (docs/node-protocol.md)",
                cfg_cmd
            );
        }
    }
    match t.problem() {
        None => println!("OK: every write accounted for"),
        Some(why) => println!("NOT OK: {why}"),
    }
    Ok(if t.garbage > 0 {
        Exit::Inconclusive
    } else if t.healthy() {
        Exit::Passed
    } else {
        Exit::Failed
    })
}
