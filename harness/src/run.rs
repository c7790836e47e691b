//! The runner: one scenario, one environment (fresh, or an attached running one). Gives each node
//! a Redis proxy and a store proxy, starts the nodes, samples the lease key on every Redis
//! instance, applies the fault schedule (faults may overlap; each is verified by an independent
//! probe and healed at its own time), then records the history, runs the checker, and takes
//! everything down. An interrupt (Ctrl-C, SIGTERM, `--max-duration`) heals what is applied,
//! records what was seen, and makes the verdict inconclusive at best.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use leasequake_reports::history::{
    EventKind, FaultEvent, FaultPhase, Header, HistoryLine, LeaseTimings, LinkCut, NodeCommand, NodeConfig,
    PipelineShape, Snapshot, HISTORY_VERSION, PROTOCOL_VERSION, PROTOCOL_VERSION_MIN,
};
use leasequake_reports::{CheckResult, Verdict};
use leasequake_toxiproxy::{Client as ProxyClient, Stream, ToxicSpec};
use rustix::process::Signal;
use tokio::sync::{broadcast, mpsc};
use tokio_util::sync::CancellationToken;
use tracing::{info, Instrument};

use crate::check::check;
use crate::clock::mono_ns;
use crate::env::{EnvConfig, Environment, PROXY_PORT_BASE};
use crate::error::HarnessError;
use crate::history::{seal, write, write_atomically, HISTORY_FILE, VERDICTS_FILE};
use crate::image::{ensure, resolve, ImageSpec};
use crate::progress::Progress;
use crate::scenario::{Direction, Fault, FaultKind, Link, Mode, Observed, Scenario, ScheduleStep, Trigger};
use crate::supervisor::{NodeHandle, NodeProcess, Received};
use crate::trigger::{fire, fire_observed, follow_master, Armed, Hit};

/// The schedule as executed, in each run directory (what `leasequake repro` replays).
pub const SCHEDULE_FILE: &str = "schedule.json";

/// How to run: everything that is not in the scenario file.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Overrides the scenario's seed.
    pub seed: Option<u64>,
    /// Overrides the scenario's node command (program and arguments).
    pub node_cmd: Option<Vec<String>>,
    /// Run in this already-running environment instead of a fresh one.
    pub attach: Option<Attach>,
    /// The display.
    pub progress: Progress,
}

/// An environment to attach to: its run id and Redis password.
#[derive(Clone)]
pub struct Attach {
    /// The run id (`env up` prints it; docker-compose.yml's is `compose`).
    pub run_id: String,
    /// The Redis password (never printed).
    pub password: String,
}

impl std::fmt::Debug for Attach {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Attach").field("run_id", &self.run_id).field("password", &"<redacted>").finish()
    }
}

/// Stops runs early (Ctrl-C, SIGTERM, a time budget) and says why; the first reason wins.
#[derive(Clone, Debug, Default)]
pub struct Interrupt {
    token: CancellationToken,
    reason: Arc<Mutex<Option<String>>>,
}

impl Interrupt {
    /// Not fired.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Stops every run, for `reason` (kept only if it is the first).
    pub fn fire(&self, reason: &str) {
        self.reason.lock().unwrap_or_else(PoisonError::into_inner).get_or_insert_with(|| reason.to_owned());
        self.token.cancel();
    }

    /// Why, once fired.
    #[must_use]
    pub fn reason(&self) -> Option<String> {
        self.reason.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Whether it fired.
    #[must_use]
    pub fn fired(&self) -> bool {
        self.token.is_cancelled()
    }

    fn token(&self) -> CancellationToken {
        self.token.clone()
    }
}

/// What a finished run left.
#[derive(Debug)]
pub struct RunOutcome {
    /// The run directory (history.jsonl, verdicts.json, node logs).
    pub dir: PathBuf,
    /// The checker's result (made inconclusive if the run was interrupted).
    pub result: CheckResult,
    /// The seed used.
    pub seed: u64,
    /// Versions seen (Redis, Docker engine).
    pub versions: BTreeMap<String, String>,
    /// How far the run went past `duration_s`, ms, because the last fault healed late.
    pub extended_ms: Option<u64>,
}

type Lines = Arc<Mutex<Vec<HistoryLine>>>;

fn push(lines: &Lines, line: HistoryLine) {
    lines.lock().unwrap_or_else(PoisonError::into_inner).push(line);
}

fn env_err(detail: String) -> HarnessError {
    HarnessError::Environment { detail }
}

/// The seed a run of `s` uses: the option's, else the file's, else a fresh random one.
#[must_use]
pub fn seed_for(s: &Scenario, opts: &RunOptions) -> u64 {
    opts.seed.or(s.seed).unwrap_or_else(rand::random)
}

/// Runs `s` with `seed` and writes its run directory `dir` (history.jsonl, verdicts.json,
/// harness.log, logs/ of every container and node).
pub async fn run(
    s: &Scenario,
    seed: u64,
    dir: &Path,
    opts: &RunOptions,
    interrupt: &Interrupt,
) -> Result<RunOutcome, HarnessError> {
    let span = tracing::info_span!("run", scenario = %s.name, seed);
    async move {
        let dir = dir.to_path_buf();
        std::fs::create_dir_all(dir.join("logs"))
            .map_err(|e| HarnessError::History { path: dir.clone(), detail: e.to_string() })?;
        let _log = crate::runlog::start(&dir.join("harness.log"));
        info!(dir = %dir.display(), "run started");
        let docker = crate::docker::connect().await?;
        let env = match &opts.attach {
            Some(a) => {
                let env = Environment::attach(docker, &a.run_id, a.password.clone(), s.nodes.count).await?;
                let policy = env.store_policy().await?;
                if policy != s.store.policy {
                    return Err(env_err(format!(
                        "{} needs a store with policy {:?}; environment {} runs {policy:?}. Fix: `leasequake env up \
                         --policy {}` and attach to that one",
                        s.name,
                        s.store.policy,
                        a.run_id,
                        format!("{:?}", s.store.policy).to_lowercase()
                    )));
                }
                opts.progress.phase(&format!(
                    "attached to environment {} (its Sentinel timings apply, not the scenario's)",
                    a.run_id
                ));
                env
            }
            None => {
                let cfg = EnvConfig {
                    nodes: s.nodes.count,
                    down_after_ms: s.sentinel.down_after_ms,
                    failover_timeout_ms: s.sentinel.failover_timeout_ms,
                    ready_timeout: Duration::from_secs(60),
                    origin: "run",
                    store_policy: s.store.policy,
                    redis_image: resolve(&docker, "LEASEQUAKE_REDIS_IMAGE", ImageSpec::redis).await?,
                    proxy_image: resolve(&docker, "LEASEQUAKE_PROXY_IMAGE", ImageSpec::proxy).await?,
                    store_image: ensure(&docker, &ImageSpec::store()?).await?,
                };
                let env = Environment::up(docker, &cfg).await?;
                opts.progress.phase(&format!(
                    "environment {} ready in {:.2} s",
                    env.run_id,
                    env.ready_in.as_secs_f64()
                ));
                env
            }
        };
        info!(run_id = %env.run_id, "environment ready");
        let driven = drive(s, seed, &env, &dir, opts, interrupt).await;
        opts.progress.phase("saving the container logs");
        env.save_logs(&dir.join("logs")).await;
        let mut versions = BTreeMap::new();
        if let Ok(info) = env.redis_cli("redis-primary", &["INFO", "server"]).await {
            if let Some(v) = info.lines().find_map(|l| l.strip_prefix("redis_version:")) {
                versions.insert("redis".to_owned(), v.trim().to_owned());
            }
        }
        if let Ok(v) = env.docker().version().await {
            versions.insert("docker".to_owned(), v.version.unwrap_or_default());
        }
        opts.progress.phase("removing the environment");
        let down = env.down().await;
        let (result, extended_ms) = driven?;
        down?;
        Ok(RunOutcome { dir, result, seed, versions, extended_ms })
    }
    .instrument(span)
    .await
}

/// The tenant of a run: fixed in a fresh environment; unique in an attached one, so earlier runs'
/// keys and collections cannot mix with this run's.
fn tenant_for(env: &Environment) -> String {
    if env.attached() {
        format!("tenant-{:x}", mono_ns())
    } else {
        "tenant-a".into()
    }
}

fn lease_key(tenant: &str) -> String {
    format!("leasequake:{{{tenant}}}:lease")
}

struct Ctx<'a> {
    s: &'a Scenario,
    /// The schedule: the file's faults and the drawn ones.
    faults: Vec<Fault>,
    seed: u64,
    env: &'a Environment,
    dir: &'a Path,
    tenant: String,
    command: Vec<String>,
    proxy: ProxyClient,
    events: broadcast::Sender<Arc<Received>>,
    tx: mpsc::Sender<Received>,
}

impl Ctx<'_> {
    fn node_config(&self, i: u32, incarnation: u64) -> NodeConfig {
        let s = self.s;
        let redis_port = self.env.proxy_ports[(2 * (i - 1)) as usize];
        let store_port = self.env.proxy_ports[(2 * (i - 1) + 1) as usize];
        NodeConfig {
            protocol: PROTOCOL_VERSION_MIN,
            protocol_max: Some(PROTOCOL_VERSION),
            node: format!("n{i}"),
            incarnation,
            tenant: self.tenant.clone(),
            redis_url: format!("redis://:{}@127.0.0.1:{redis_port}/", self.env.redis_password()),
            store_addr: format!("127.0.0.1:{store_port}"),
            lease: LeaseTimings {
                ttl_ms: s.lease.ttl_ms,
                renew_ms: s.renew_ms(),
                acquire_wait_ms: s.acquire_wait_ms(),
                command_timeout_ms: s.command_timeout_ms(),
            },
            pipeline: PipelineShape {
                batches: s.pipeline.batches,
                batch_size: s.pipeline.batch_size,
                embed_ms: s.pipeline.embed_ms,
                prepare_ms: s.pipeline.prepare_ms,
                checkpoints: s.pipeline.checkpoints.clone(),
                sync_points: {
                    let mut v: Vec<u8> = self
                        .faults
                        .iter()
                        .filter_map(|f| match f.trigger() {
                            Some(Trigger::Checkpoint(n)) => Some(n),
                            _ => None,
                        })
                        .collect();
                    v.sort_unstable();
                    v.dedup();
                    v
                },
                pause_ms: s.pipeline.pause_ms,
                store_timeout_ms: (s.lease.ttl_ms * 2).max(2000),
            },
            fence_source: s.store.fence_source,
            seed: self.seed ^ u64::from(i).wrapping_mul(0x9e37_79b9_7f4a_7c15),
        }
    }

    fn spawn(&self, i: u32, incarnation: u64) -> Result<NodeProcess, HarnessError> {
        let log = self.dir.join("logs").join(format!("n{i}.stderr.log"));
        let stderr = std::fs::OpenOptions::new().create(true).append(true).open(log).map_or(Stdio::null(), Stdio::from);
        let env = self.node_env(i)?;
        let n = NodeProcess::spawn_with_env(
            &self.command,
            self.node_config(i, incarnation),
            self.tx.clone(),
            stderr,
            &env,
        )?;
        n.send(NodeCommand::Start)?;
        info!(node = %format!("n{i}"), incarnation, pid = n.pid(), "node started");
        Ok(n)
    }
}

impl Ctx<'_> {
    /// Whether a fault of the schedule moves a node's wall clock.
    fn moves_node_clocks(&self) -> bool {
        self.faults.iter().any(|f| f.kind == FaultKind::ClockJump && f.target.is_some())
    }

    /// Node `i`'s clock offset file (the clock shim's, see harness/clockshim).
    fn node_clock_file(&self, i: u32) -> PathBuf {
        self.dir.join("clock").join(format!("n{i}-offset-ms"))
    }

    /// The environment a node starts with: only when the schedule moves a node's wall clock, the
    /// clock shim preloaded (after any LD_PRELOAD of the caller's) and the node's own offset file.
    fn node_env(&self, i: u32) -> Result<Vec<(String, String)>, HarnessError> {
        if !self.moves_node_clocks() {
            return Ok(Vec::new());
        }
        let shim = crate::image::clock_shim()?;
        let file = self.node_clock_file(i);
        if !file.exists() {
            write_clock_offset(&file, 0).map_err(|e| env_err(format!("cannot create {}: {e}", file.display())))?;
        }
        let preload = match std::env::var("LD_PRELOAD") {
            Ok(p) if !p.is_empty() => format!("{p}:{}", shim.display()),
            _ => shim.display().to_string(),
        };
        Ok(vec![("LD_PRELOAD".into(), preload), ("LEASEQUAKE_CLOCK_FILE".into(), file.display().to_string())])
    }
}

/// Writes a clock offset file in place, 64 bytes, never truncating it: the shim reads it through a
/// shared mapping at any moment, and a file that shrank under the mapping would fault.
fn write_clock_offset(file: &Path, offset_ms: i64) -> std::io::Result<()> {
    use std::io::Write;
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let text = format!("{:<64}", format!("{offset_ms:+}"));
    let mut f = std::fs::OpenOptions::new().create(true).write(true).truncate(false).open(file)?;
    f.write_all(text.as_bytes())
}

/// `clock_jump` on a node: moves its wall clock (CLOCK_REALTIME; monotonic clocks untouched, as
/// NTP steps do) through the preloaded shim. Verified twice: the shim is mapped in the node's
/// process (a static binary ignores the preload: not verifiable), and `date` under the same shim
/// and file reads the jump.
async fn apply_node_clock(ctx: &Ctx<'_>, f: &Fault, index: u32, node: Option<&NodeHandle>) -> Result<String, String> {
    let n = node.ok_or("no such node")?;
    let jump = f.jump_ms.unwrap_or(0);
    let file = ctx.node_clock_file(index);
    let shim = crate::image::clock_shim().map_err(|e| e.to_string())?;
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", n.pid())).unwrap_or_default();
    let shim_name = shim.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    if !maps.contains(&shim_name) {
        return Err(format!(
            "{}'s process (pid {}) does not load the clock shim (a static binary, or one that clears LD_PRELOAD): its wall clock cannot be moved",
            n.node(),
            n.pid()
        ));
    }
    write_clock_offset(&file, jump).map_err(|e| format!("cannot write {}: {e}", file.display()))?;
    let seen = probe_shim_clock(&shim, &file).await?;
    if (seen - jump).abs() > 1000 {
        return Err(format!("asked for a {jump:+} ms jump, but `date` under the shim is {seen:+} ms off the host's"));
    }
    Ok(format!(
        "{}'s wall clock moved {jump:+} ms: the shim is mapped in pid {}, and `date` under it is {seen:+} ms off the host's (monotonic clocks untouched)",
        n.node(),
        n.pid()
    ))
}

/// How far `date` under the clock shim, reading `file`, is from the host's clock, ms.
async fn probe_shim_clock(shim: &Path, file: &Path) -> Result<i64, String> {
    let before = unix_ms();
    let out = tokio::time::timeout(
        Duration::from_secs(5),
        tokio::process::Command::new("date")
            .arg("+%s%3N")
            .env("LD_PRELOAD", shim)
            .env("LEASEQUAKE_CLOCK_FILE", file)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .map_err(|_| "`date` under the shim did not answer within 5 s".to_owned())?
    .map_err(|e| format!("cannot run `date` under the shim: {e}"))?;
    let after = unix_ms();
    let text = String::from_utf8_lossy(&out.stdout);
    let ms: i64 = text.trim().parse().map_err(|_| format!("`date` under the shim printed `{}`", text.trim()))?;
    Ok(ms - (before + after) / 2)
}

/// Whether `cmd`'s program can be started: an executable file (a path with a `/`, from the
/// current directory) or a name found on `PATH`. Else what is wrong, naming the fix.
pub fn startable(cmd: &[String]) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let Some(program) = cmd.first().filter(|p| !p.is_empty()) else {
        return Err("it is empty: give a program, e.g. --node-cmd \"python3 node.py\"".into());
    };
    let executable = |p: &Path| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    if program.contains('/') {
        return if executable(Path::new(program)) {
            Ok(())
        } else {
            Err(format!(
                "`{}` is not an executable file (relative to {}); for the Python node run scripts/deps first",
                leasequake_reports::printable(program),
                std::env::current_dir().map(|d| d.display().to_string()).unwrap_or_default()
            ))
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    if std::env::split_paths(&path).any(|d| executable(&d.join(program))) {
        Ok(())
    } else {
        Err(format!("`{}` is not on PATH", leasequake_reports::printable(program)))
    }
}

fn node_command(s: &Scenario, opts: &RunOptions) -> Result<Vec<String>, HarnessError> {
    match opts.node_cmd.as_ref().or(s.nodes.command.as_ref()) {
        Some(c) => Ok(c.clone()),
        // This very binary, through the kernel's link to its inode: a rebuild that replaces
        // target/debug/leasequake while a suite runs must not make the later nodes unstartable.
        None => Ok(vec!["/proc/self/exe".into(), "node".into()]),
    }
}

/// A fault in effect: what it is, whom it hit.
struct Applied {
    id: u64,
    fault: Fault,
    target: String,
    index: u32,
}

async fn drive(
    s: &Scenario,
    seed: u64,
    env: &Environment,
    dir: &Path,
    opts: &RunOptions,
    interrupt: &Interrupt,
) -> Result<(CheckResult, Option<u64>), HarnessError> {
    let cancel = interrupt.token();
    let proxy = ProxyClient::new(env.proxy_api.clone());
    let proxy_err = |e: leasequake_toxiproxy::ClientError| env_err(format!("the fault proxy refused a request: {e}"));
    for i in 1..=s.nodes.count {
        let base = PROXY_PORT_BASE + 2 * (i as u16 - 1);
        for (name, listen, upstream) in [
            (format!("n{i}-redis"), format!("0.0.0.0:{base}"), "redis-primary:6379"),
            (format!("n{i}-store"), format!("0.0.0.0:{}", base + 1), "store:7700"),
        ] {
            if env.attached() {
                // A run before this one may have left its proxies (and their toxics).
                let _ = proxy.delete_proxy(&name).await;
            }
            proxy.create_proxy(&name, &listen, upstream).await.map_err(proxy_err)?;
        }
    }
    let audit_after = match leasequake_toxiproxy::http::exchange(&env.store_addr, "GET", "/v1/health", None).await {
        Ok((200, body)) => serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v["audit_seq"].as_u64())
            .ok_or_else(|| env_err(format!("the store's health answer has no audit_seq: {body}")))?,
        other => return Err(env_err(format!("the store does not answer its health check: {other:?}"))),
    };
    let (tx, mut rx) = mpsc::channel::<Received>(65_536);
    let (events, _) = broadcast::channel::<Arc<Received>>(4096);
    let ctx = Ctx {
        s,
        faults: s.schedule(seed),
        seed,
        env,
        dir,
        tenant: tenant_for(env),
        command: node_command(s, opts)?,
        proxy,
        events: events.clone(),
        tx,
    };
    let started_ns = mono_ns();
    let lines: Lines = Arc::new(Mutex::new(vec![HistoryLine::Header(Header {
        version: HISTORY_VERSION,
        run_id: env.run_id.clone(),
        scenario: s.name.clone(),
        seed,
        tenant: ctx.tenant.clone(),
        policy: s.store.policy,
        fence_source: s.store.fence_source,
        expected: s.expected_failure(),
        liveness_bound_ms: s.liveness_bound_ms(),
        node_silence_ms: s.lease.ttl_ms * 4 + 5000,
        observer_gap_ms: 5000,
        started_ns,
        audit_after,
        renew_ms: Some(s.renew_ms()),
        ttl_ms: Some(s.lease.ttl_ms),
        waste_budget_ms: s.waste_budget_ms,
        node_command: opts.node_cmd.clone().or_else(|| s.nodes.command.clone()),
        clients_follow: s.nodes.follow_failovers,
        round_estimate_ms: Some(s.round_estimate_ms()),
    })]));

    // Nodes and the event collector (which also tracks the current owner for role targets and
    // hands every event to the probes that wait for one).
    let mut router_rx = ctx.events.subscribe();
    let mut nodes: BTreeMap<u32, (NodeProcess, u64)> = BTreeMap::new();
    let handles: Arc<Mutex<BTreeMap<u32, NodeHandle>>> = Arc::default();
    for i in 1..=s.nodes.count {
        let n = ctx.spawn(i, 1)?;
        handles.lock().unwrap_or_else(PoisonError::into_inner).insert(i, n.handle());
        nodes.insert(i, (n, 1));
    }
    opts.progress.phase(&format!("running ({} nodes, {} s)", s.nodes.count, s.duration_s));
    let owner: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
    let collector = {
        let (lines, owner) = (lines.clone(), owner.clone());
        tokio::spawn(async move {
            while let Some(r) = rx.recv().await {
                let r = Arc::new(r);
                let line = match &r.line {
                    Ok(event) => {
                        if let EventKind::Acquired { .. } = &event.kind {
                            *owner.lock().unwrap_or_else(PoisonError::into_inner) = Some(r.node.clone());
                        }
                        HistoryLine::Node {
                            node: r.node.clone(),
                            incarnation: r.incarnation,
                            received_ns: r.received_ns,
                            event: event.clone(),
                        }
                    }
                    Err(g) => HistoryLine::Garbage {
                        node: r.node.clone(),
                        received_ns: r.received_ns,
                        raw: g.raw.clone(),
                        why: g.why.clone(),
                    },
                };
                push(&lines, line);
                let _ = events.send(r); // nobody listening is fine
            }
        })
    };

    // The observer (who holds the key on each instance) and what it saw, for the triggers that
    // follow it (`key_expired`, `role_changed`).
    let stop_observer = CancellationToken::new();
    let (seen_tx, mut seen_rx) = mpsc::channel::<Observed>(64);
    let observed_lines = |l: HistoryLine| push(&lines, l);
    let key = lease_key(&ctx.tenant);
    let observer = crate::observer::observe(env, &key, &observed_lines, seen_tx, &stop_observer);

    let progress = &opts.progress;
    let fault_line = |id: u64, fault: FaultKind, target: &str, phase: FaultPhase, detail: String| {
        HistoryLine::Fault(FaultEvent {
            id,
            fault,
            target: target.to_owned(),
            phase,
            at_ns: mono_ns(),
            detail,
            redis_link: None,
        })
    };
    // Triggers: a router hears every event; a sync point or an acquire that an armed fault waits
    // for is handed to the schedule, which applies the fault before the node is let go.
    let armed: Arc<Mutex<Vec<Armed>>> = Arc::default();
    let (hit_tx, mut hit_rx) = mpsc::channel::<Hit>(16);
    // Sentinel-aware clients: every node's Redis proxy follows a new master the observer sees.
    let follower = s.nodes.follow_failovers.then(|| (ProxyClient::new(env.proxy_api.clone()), s.nodes.count));
    let router = {
        let (armed, handles, stop) = (armed.clone(), handles.clone(), stop_observer.clone());
        async move {
            // Bounded by the run (stop) and by the event stream.
            loop {
                let r = tokio::select! {
                    () = stop.cancelled() => break,
                    Some(seen) = seen_rx.recv() => {
                        if let Some((proxy, count)) = &follower {
                            follow_master(proxy, *count, &seen).await;
                        }
                        fire_observed(&armed, &seen, &hit_tx).await;
                        continue;
                    }
                    r = router_rx.recv() => match r {
                        Ok(r) => r,
                        Err(broadcast::error::RecvError::Lagged(_)) => continue,
                        Err(broadcast::error::RecvError::Closed) => break,
                    },
                };
                let Ok(ev) = &r.line else { continue };
                // Every fault armed for this event fires on it (a clock step and a stalled
                // renewal can land right after the same acquire), in the order they were armed.
                fire(&armed, &hit_tx, |t| t.fired_by(&ev.kind), &r.node).await;
                if let EventKind::SyncPoint { number: n, .. } = ev.kind {
                    let h = handles.lock().unwrap_or_else(PoisonError::into_inner).get(&node_index(&r.node)).cloned();
                    if let Some(h) = h {
                        let _ = h.send(NodeCommand::Go { checkpoint: n });
                    }
                }
            }
        }
    };
    // The schedule: every apply, arm, expiry and heal on one timeline, in time order (heals
    // first when several fall together), so faults can overlap; a trigger firing adds its heal.
    let schedule = async {
        let faults = &ctx.faults;
        let t0 = Instant::now();
        let now_ms = || t0.elapsed().as_millis() as u64;
        // The schedule as executed (resolved targets, actual times): what `leasequake repro` replays.
        let mut executed: Vec<ScheduleStep> = Vec::new();
        let record = |executed: &mut Vec<ScheduleStep>, id: u64, f: &Fault, target: &str, at_ms: u64| {
            executed.push(ScheduleStep::executed(id, f, target, at_ms));
        };
        let bound_ms = s.liveness_bound_ms();
        // (at ms, order: 0 heal, 1 expire, 2 arm, 3 apply, fault index). At one instant, triggers
        // are armed before faults are applied: an apply can take seconds (a failover waits for the
        // promotion), and a trigger armed after it would miss the very event it waits for.
        let mut steps: BinaryHeap<Reverse<(u64, u8, usize)>> = BinaryHeap::new();
        for (i, f) in faults.iter().enumerate() {
            steps.push(Reverse((f.at_ms(), if f.trigger().is_some() { 2 } else { 3 }, i)));
            if f.trigger().is_none() {
                steps.push(Reverse((f.at_ms() + f.duration_ms(), 0, i)));
            }
        }
        let mut active: BTreeMap<usize, Applied> = BTreeMap::new();
        let mut armed_count = 0usize;
        // When the last fault healed: on a loaded machine a heal can land late, and the run then
        // lasts until the liveness bound after it, so liveness is judged rather than inconclusive.
        let mut last_heal: Option<Instant> = None;
        // Bounded: each fault is applied, expired or healed once.
        loop {
            let next = steps.peek().map(|Reverse((at, _, _))| t0 + Duration::from_millis(*at));
            if next.is_none() && armed_count == 0 {
                break;
            }
            let step = tokio::select! {
                () = cancel.cancelled() => break,
                Some((i, node, done)) = hit_rx.recv() => {
                    armed_count -= 1;
                    let f = &faults[i];
                    let id = f.id(i);
                    let target = if f.target.is_some() { node.clone() } else { untargeted(f).to_owned() };
                    let index = node_index(&target);
                    let handle = handles.lock().unwrap_or_else(PoisonError::into_inner).get(&index).cloned();
                    let kind = f.kind;
                    let on = f.on.clone().unwrap_or_default();
                    push(&lines, fault_line(id, kind, &target, FaultPhase::Requested, format!("triggered: {node} {on}")));
                    record(&mut executed, id, f, &target, now_ms());
                    let outcome = apply(&ctx, id, f, index, handle.as_ref()).await;
                    let label = format!("fault {id} {kind} on {target} ({on})");
                    push(&lines, fault_outcome(progress, (id, f), &target, &label, outcome));
                    let _ = done.send(());
                    active.insert(i, Applied { id, fault: f.clone(), target, index });
                    steps.push(Reverse((now_ms() + f.duration_ms(), 0, i)));
                    continue;
                }
                () = async { match next { Some(at) => tokio::time::sleep_until(at.into()).await, None => std::future::pending().await } } => {
                    steps.pop().map(|Reverse(step)| step)
                }
            };
            let Some((_, order, i)) = step else { continue };
            let f = &faults[i];
            let id = f.id(i);
            match (order, f.trigger()) {
                (0, _) => {
                    if let Some(a) = active.remove(&i) {
                        let healed = heal(&ctx, &a, true, &mut nodes, &handles).await;
                        let detail = healed.detail();
                        last_heal = Some(Instant::now());
                        info!(fault = a.id, node = %a.target, %detail, "fault healed");
                        progress.fault(
                            &format!("fault {} {} on {}: healed ({detail})", a.id, a.fault.kind, a.target),
                            false,
                        );
                        let unsettled = matches!(healed, Heal::Unsettled(_));
                        push(&lines, fault_line(a.id, a.fault.kind, &a.target, FaultPhase::Healed, detail.clone()));
                        if unsettled {
                            // Not the lease's doing: the verdict cannot stand on this environment.
                            push(&lines, fault_line(a.id, a.fault.kind, &a.target, FaultPhase::Failed, detail));
                        }
                    }
                }
                (1, _) => {
                    let still = {
                        let mut a = armed.lock().unwrap_or_else(PoisonError::into_inner);
                        let before = a.len();
                        a.retain(|(k, _, _)| *k != i);
                        before != a.len()
                    };
                    if still {
                        armed_count -= 1;
                        let target = f.target.clone().unwrap_or_else(|| untargeted(f).to_owned());
                        let why = format!(
                            "`{}` did not happen within {} ms of at_s {} s",
                            f.on.as_deref().unwrap_or(""),
                            bound_ms,
                            f.at_s
                        );
                        progress.fault(&format!("fault {id} {} on {target}: NOT VERIFIED ({why})", f.kind), false);
                        push(&lines, fault_line(id, f.kind, &target, FaultPhase::Requested, String::new()));
                        push(&lines, fault_line(id, f.kind, &target, FaultPhase::Failed, why));
                    }
                }
                (_, Some(trigger)) => {
                    let named = f.target.as_deref().filter(|t| *t != "owner").map(str::to_owned);
                    armed.lock().unwrap_or_else(PoisonError::into_inner).push((i, trigger, named));
                    armed_count += 1;
                    steps.push(Reverse((now_ms() + bound_ms, 1, i)));
                    progress.fault(
                        &format!("fault {id} {} armed: waiting for `{}`", f.kind, f.on.as_deref().unwrap_or("")),
                        false,
                    );
                }
                (_, None) => {
                    let target = resolve_target(f, &owner, s.nodes.count);
                    let kind = f.kind;
                    push(&lines, fault_line(id, kind, &target, FaultPhase::Requested, String::new()));
                    record(&mut executed, id, f, &target, now_ms());
                    let index = node_index(&target);
                    let handle = handles.lock().unwrap_or_else(PoisonError::into_inner).get(&index).cloned();
                    let outcome = apply(&ctx, id, f, index, handle.as_ref()).await;
                    let label = format!("fault {id} {kind} on {target}");
                    push(&lines, fault_outcome(progress, (id, f), &target, &label, outcome));
                    // Healed at its time even when unverified: part of it may be in effect.
                    active.insert(i, Applied { id, fault: f.clone(), target, index });
                }
            }
        }
        // Interrupted: heal what is still applied, now.
        let mut still_applied = Vec::new();
        for (_, a) in std::mem::take(&mut active) {
            let healed = heal(&ctx, &a, false, &mut nodes, &handles).await;
            if !matches!(healed, Heal::Done(_)) {
                still_applied.push(a.id);
            }
            let detail = healed.detail();
            push(&lines, fault_line(a.id, a.fault.kind, &a.target, FaultPhase::Healed, format!("early: {detail}")));
        }
        let planned = t0 + Duration::from_secs(s.duration_s);
        let end = run_end(planned, last_heal, bound_ms);
        let extended_ms = (end > planned).then(|| end.duration_since(planned).as_millis() as u64);
        if let Some(late) = extended_ms {
            info!(extended_ms = late, "a fault healed late; the run lasts until the liveness bound after it");
            progress.phase(&format!(
                "the last fault healed late: the run goes on {late} ms past duration_s, to the liveness bound"
            ));
        }
        tokio::select! { () = cancel.cancelled() => {}, () = tokio::time::sleep_until(end.into()) => {} }
        let schedule = serde_json::to_vec_pretty(&executed).unwrap_or_default();
        let _ = write_atomically(&dir.join(SCHEDULE_FILE), &schedule);
        (nodes, still_applied, extended_ms)
    };
    let schedule = async {
        let out = schedule.await;
        stop_observer.cancel();
        out
    };
    // The environment's own changes (containers, Sentinels, proxies), until the observer stops.
    let pushed = |l: HistoryLine| push(&lines, l);
    let watcher = crate::watch::watch(env, s.nodes.count, &pushed, &stop_observer);
    let ((nodes, still_applied, extended_ms), (), (), ()) = tokio::join!(schedule, observer, router, watcher);
    progress.phase("stopping the nodes");
    for (_, (n, _)) in nodes {
        n.stop(Duration::from_secs(5)).await;
    }
    let Ctx { proxy, tx, tenant, .. } = ctx;
    drop(tx);
    let _ = tokio::time::timeout(Duration::from_secs(5), collector).await;

    // The store's audit log and what was left.
    progress.phase("reading the store's audit log");
    let path = format!("/v1/audit?after={audit_after}");
    let (status, audit) = leasequake_toxiproxy::http::exchange(&env.store_addr, "GET", &path, None)
        .await
        .map_err(|e| env_err(format!("cannot read the store's audit log: {e}")))?;
    if status == 200 {
        for l in audit.lines().filter(|l| !l.trim().is_empty()) {
            if let Ok(r) = serde_json::from_str(l) {
                push(&lines, HistoryLine::Audit(r));
            }
        }
    }
    let view =
        leasequake_toxiproxy::http::exchange(&env.store_addr, "GET", &format!("/v1/tenants/{tenant}"), None).await.ok();
    let left: Vec<String> = view
        .and_then(|(_, b)| serde_json::from_str::<serde_json::Value>(&b).ok())
        .and_then(|v| v["collections"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter(|c| c["live"] == false)
        .filter_map(|c| c["name"].as_str().map(str::to_owned))
        .collect();
    if env.attached() {
        for i in 1..=s.nodes.count {
            for name in [format!("n{i}-redis"), format!("n{i}-store")] {
                let _ = proxy.delete_proxy(&name).await;
            }
        }
    }
    push(
        &lines,
        HistoryLine::Snapshot(Snapshot {
            ended_ns: mono_ns(),
            faults_still_applied: still_applied,
            temporary_collections_left: left,
            versions: BTreeMap::from([("harness".to_owned(), env!("CARGO_PKG_VERSION").to_owned())]),
            extended_ms,
            seal: None,
        }),
    );
    let mut lines = std::mem::take(&mut *lines.lock().unwrap_or_else(PoisonError::into_inner));
    seal(&mut lines);
    write(&dir.join(HISTORY_FILE), &lines)?;
    progress.phase("checking the history");
    let mut result = check(&lines);
    if let Some(reason) = interrupt.reason() {
        let why = format!("the run was stopped early: {reason}; the history holds what was seen");
        result.inconclusive.insert(0, why);
        result.verdict = result.verdict.combine(Verdict::Inconclusive);
    }
    let json = serde_json::to_vec_pretty(&result)
        .map_err(|e| HarnessError::History { path: dir.to_path_buf(), detail: e.to_string() })?;
    write_atomically(&dir.join(VERDICTS_FILE), &json)?;
    Ok((result, extended_ms))
}

/// When the run ends: at `duration_s`, or, when the last fault healed so late that the liveness
/// bound after it falls beyond that, at the bound plus a margin for the sync to be recorded. The
/// extension is bounded by one minute (a heal has its own timeouts; this is the backstop).
fn run_end(planned: Instant, last_heal: Option<Instant>, bound_ms: u64) -> Instant {
    const MARGIN: Duration = Duration::from_millis(500);
    const MAX_EXTENSION: Duration = Duration::from_secs(60);
    let Some(healed) = last_heal else { return planned };
    let needed = healed + Duration::from_millis(bound_ms) + MARGIN;
    needed.clamp(planned, planned + MAX_EXTENSION)
}

/// How a verified partition left its node's Redis link, for the checker: a blackhole holds a
/// command in flight (the probe was silent), a reset fails it at once (the probe was reset).
fn redis_link(f: &Fault) -> Option<LinkCut> {
    let cuts_redis = f.kind == FaultKind::Partition && matches!(f.link.unwrap_or(Link::Both), Link::Redis | Link::Both);
    cuts_redis.then(|| if f.mode == Some(Mode::Blackhole) { LinkCut::Silent } else { LinkCut::Reset })
}

/// A fault's verified or failed line, told to the log and the display too.
fn fault_outcome(
    progress: &Progress,
    (id, f): (u64, &Fault),
    target: &str,
    label: &str,
    outcome: Result<String, String>,
) -> HistoryLine {
    let (phase, detail) = match outcome {
        Ok(detail) => {
            info!(fault = id, node = %target, %detail, "fault verified");
            progress.fault(&format!("{label}: verified ({detail})"), true);
            (FaultPhase::Verified, detail)
        }
        Err(why) => {
            info!(fault = id, node = %target, %why, "fault not verified");
            progress.fault(&format!("{label}: NOT VERIFIED ({why})"), false);
            (FaultPhase::Failed, why)
        }
    };
    HistoryLine::Fault(FaultEvent {
        id,
        fault: f.kind,
        target: target.to_owned(),
        phase,
        at_ns: mono_ns(),
        detail,
        redis_link: (phase == FaultPhase::Verified).then(|| redis_link(f)).flatten(),
    })
}

/// `n3` -> 3 (0 for anything else, which names no node).
fn node_index(target: &str) -> u32 {
    target.strip_prefix('n').and_then(|n| n.parse().ok()).unwrap_or(0)
}

fn resolve_target(f: &Fault, owner: &Mutex<Option<String>>, count: u32) -> String {
    let owner = || owner.lock().unwrap_or_else(PoisonError::into_inner).clone();
    match f.target.as_deref() {
        Some("owner") => owner().unwrap_or_else(|| "n1".into()),
        Some("non-owner") => {
            let o = owner().unwrap_or_default();
            (1..=count).map(|i| format!("n{i}")).find(|n| *n != o).unwrap_or_else(|| "n1".into())
        }
        Some(t) => t.to_owned(),
        None => untargeted(f).into(),
    }
}

fn stop_signal(signal: &str) -> testcontainers::bollard::query_parameters::KillContainerOptions {
    testcontainers::bollard::query_parameters::KillContainerOptionsBuilder::new().signal(signal).build()
}

/// What a fault without a node target acts on.
fn untargeted(f: &Fault) -> &'static str {
    if matches!(
        f.kind,
        FaultKind::Failover
            | FaultKind::RedisRestart
            | FaultKind::KeyLoss
            | FaultKind::PauseWrites
            | FaultKind::ClockJump
    ) {
        "redis-primary"
    } else {
        "store"
    }
}

fn proxies_of(index: u32, link: Option<Link>) -> Vec<(String, usize)> {
    let base = 2 * (index as usize - 1);
    match link.unwrap_or(Link::Both) {
        Link::Redis => vec![(format!("n{index}-redis"), base)],
        Link::Store => vec![(format!("n{index}-store"), base + 1)],
        Link::Both => vec![(format!("n{index}-redis"), base), (format!("n{index}-store"), base + 1)],
    }
}

/// The state letter of a process (`R`, `S`, `T` stopped, `Z` zombie), if it exists.
fn process_state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// Sends a PING through the proxy on host `port` and says what came back within 300 ms.
async fn probe(port: u16) -> &'static str {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(Ok(mut c)) =
        tokio::time::timeout(Duration::from_millis(300), tokio::net::TcpStream::connect(("127.0.0.1", port))).await
    else {
        return "refused";
    };
    if c.write_all(b"PING\r\n").await.is_err() {
        return "reset";
    }
    let mut buf = [0u8; 64];
    match tokio::time::timeout(Duration::from_millis(300), c.read(&mut buf)).await {
        Err(_) => "silent",
        Ok(Ok(0)) => "closed",
        Ok(Ok(_)) => "answered",
        Ok(Err(_)) => "reset",
    }
}

/// The streams a `slow_redis` delays.
fn slow_redis_streams(f: &Fault) -> &'static [Stream] {
    match f.direction.unwrap_or(Direction::Replies) {
        Direction::Replies => &[Stream::Downstream],
        Direction::Requests => &[Stream::Upstream],
        Direction::Both => &[Stream::Upstream, Stream::Downstream],
    }
}

fn slow_redis_toxic(id: u64, stream: usize) -> String {
    format!("{}-{stream}", toxic_name(id))
}

/// `slow_redis`: latency on one node's Redis link, verified by timing a PING through that very
/// link (the node's own connections carry the same toxics): at least the latency less the jitter,
/// once per delayed direction.
async fn apply_slow_redis(ctx: &Ctx<'_>, id: u64, f: &Fault, index: u32) -> Result<String, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (latency, jitter) = (f.latency_ms.unwrap_or(0), f.jitter_ms.unwrap_or(0));
    let streams = slow_redis_streams(f);
    let name = format!("n{index}-redis");
    for (k, stream) in streams.iter().enumerate() {
        let toxic = ToxicSpec::latency(*stream, latency, jitter).named(slow_redis_toxic(id, k));
        ctx.proxy.add_toxic(&name, &toxic).await.map_err(|e| e.to_string())?;
    }
    let ways = streams.len() as u64;
    let floor = latency.saturating_sub(jitter).saturating_mul(ways);
    let limit = Duration::from_millis(latency.saturating_add(jitter).saturating_mul(ways).saturating_add(2000));
    let port = ctx.env.proxy_ports[2 * (index as usize - 1)];
    let t = Instant::now();
    let answer = tokio::time::timeout(limit, async {
        let mut c = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
        c.write_all(b"PING\r\n").await?;
        let mut buf = [0u8; 64];
        c.read(&mut buf).await
    })
    .await;
    let took = t.elapsed().as_millis() as u64;
    match answer {
        Ok(Ok(n)) if n > 0 && took >= floor => Ok(format!(
            "{name}: a PING through it answered after {took} ms (latency {latency} ± {jitter} ms, {ways} way(s))"
        )),
        Ok(Ok(n)) if n > 0 => Err(format!("{name}: a PING through it answered after {took} ms, under {floor} ms")),
        Ok(Ok(_)) => Err(format!("{name}: the probe's connection closed without an answer")),
        Ok(Err(e)) => Err(format!("{name}: the probe failed: {e}")),
        Err(_) => Err(format!("{name}: no answer to the probe within {} ms", limit.as_millis())),
    }
}

/// How long a connection lives under `lose_replies` before it is cut, ms.
const LOSE_REPLIES_CUT_MS: u64 = 100;

/// `lose_replies`: a `timeout` toxic on the replies of one node's Redis link (requests pass and
/// run; replies are dropped; the connection is cut after 100 ms). Verified end to end: a probe
/// sends `AUTH` and a `SET` of a probe key through that very link, hears nothing, sees the
/// connection cut, and then finds the key set on the primary: the command ran, its reply was lost.
async fn apply_lose_replies(ctx: &Ctx<'_>, id: u64, index: u32) -> Result<String, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let name = format!("n{index}-redis");
    let toxic = ToxicSpec::timeout(Stream::Downstream, LOSE_REPLIES_CUT_MS).named(toxic_name(id));
    ctx.proxy.add_toxic(&name, &toxic).await.map_err(|e| e.to_string())?;
    let key = format!("leasequake:probe:lose-replies:{id}");
    let password = ctx.env.redis_password();
    let request = format!(
        "*2\r\n$4\r\nAUTH\r\n${}\r\n{password}\r\n*5\r\n$3\r\nSET\r\n${}\r\n{key}\r\n$1\r\n1\r\n$2\r\nPX\r\n$5\r\n60000\r\n",
        password.len(),
        key.len()
    );
    let port = ctx.env.proxy_ports[2 * (index as usize - 1)];
    let t = Instant::now();
    let heard = tokio::time::timeout(Duration::from_millis(LOSE_REPLIES_CUT_MS + 2000), async {
        let mut c = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
        c.write_all(request.as_bytes()).await?;
        let mut buf = [0u8; 256];
        c.read(&mut buf).await
    })
    .await;
    let took = t.elapsed().as_millis();
    match heard {
        Ok(Ok(0)) | Ok(Err(_)) => {}
        Ok(Ok(n)) => return Err(format!("{name}: the probe got a {n}-byte reply through a link that loses replies")),
        Err(_) => {
            return Err(format!("{name}: the probe's connection was not cut within {} ms", LOSE_REPLIES_CUT_MS + 2000))
        }
    }
    let got = ctx.env.redis_cli("redis-primary", &["GET", &key]).await.map_err(|e| e.to_string())?;
    if got.trim() != "1" {
        return Err(format!("{name}: the probe's SET did not reach Redis (GET answered `{}`)", got.trim()));
    }
    let _ = ctx.env.redis_cli("redis-primary", &["DEL", &key]).await;
    Ok(format!(
        "{name}: a probe's SET ran on redis-primary, its reply never came, and the connection was cut after {took} ms"
    ))
}

/// The name of fault `id`'s toxics, so overlapping faults on one proxy stay apart.
fn toxic_name(id: u64) -> String {
    format!("fault-{id}")
}

/// Applies one fault and verifies it with an independent probe; the detail says what was seen.
async fn apply(ctx: &Ctx<'_>, id: u64, f: &Fault, index: u32, node: Option<&NodeHandle>) -> Result<String, String> {
    let (proxy, env) = (&ctx.proxy, ctx.env);
    match f.kind {
        FaultKind::SlowRedis => apply_slow_redis(ctx, id, f, index).await,
        FaultKind::LoseReplies => apply_lose_replies(ctx, id, index).await,
        FaultKind::Partition => {
            let blackhole = f.mode == Some(Mode::Blackhole);
            let mut seen = Vec::new();
            for (name, slot) in proxies_of(index, f.link) {
                let toxic = if blackhole {
                    ToxicSpec::timeout(Stream::Upstream, 0)
                } else {
                    ToxicSpec::reset_peer(Stream::Downstream, 0)
                };
                proxy.add_toxic(&name, &toxic.named(toxic_name(id))).await.map_err(|e| e.to_string())?;
                let got = probe(env.proxy_ports[slot]).await;
                let ok = if blackhole { got == "silent" } else { matches!(got, "reset" | "closed" | "refused") };
                if !ok {
                    return Err(format!("{name}: the probe got `{got}` through the cut link"));
                }
                seen.push(format!("{name}: probe {got}"));
            }
            Ok(seen.join(", "))
        }
        FaultKind::Pause => {
            let n = node.ok_or("no such node")?;
            n.signal(Signal::STOP).map_err(|e| e.to_string())?;
            // Signal delivery is asynchronous: wait (at most 500 ms) for the kernel to stop it.
            let sent = Instant::now();
            for _ in 0..50 {
                if process_state(n.pid()) == Some('T') {
                    return Ok(format!(
                        "SIGSTOP; /proc/{}/stat state T after {} µs",
                        n.pid(),
                        sent.elapsed().as_micros()
                    ));
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(format!("SIGSTOP sent, but the process state is {:?}, not T, after 500 ms", process_state(n.pid())))
        }
        FaultKind::StallRenewal => {
            let n = node.ok_or("no such node")?;
            n.send(NodeCommand::StallRenewal { ms: f.duration_ms() }).map_err(|e| e.to_string())?;
            verify_stalled(ctx, n.node()).await
        }
        FaultKind::SlowModel => {
            let n = node.ok_or("no such node")?;
            let extra = f.latency_ms.unwrap_or(0);
            let mut events = ctx.events.subscribe();
            n.send(NodeCommand::SlowModel { ms: extra }).map_err(|e| e.to_string())?;
            let normal = ctx.s.pipeline.embed_ms;
            // The probe: the node's next model call takes at least the added time. Bounded: a
            // node that makes no model call (it does not hold the lease) fails the verification.
            let limit = Duration::from_millis(extra + normal + 2 * ctx.s.lease.ttl_ms + 2000);
            let wait = async {
                loop {
                    match events.recv().await {
                        Ok(r) if r.node == n.node() => {
                            if let Ok(ev) = &r.line {
                                if let EventKind::ModelCall { ms, .. } = ev.kind {
                                    if ms >= normal + extra {
                                        return Ok(format!(
                                            "{}'s next model call took {ms} ms (normally {normal})",
                                            n.node()
                                        ));
                                    }
                                }
                            }
                        }
                        Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                        Err(broadcast::error::RecvError::Closed) => return Err("the node's events ended".to_owned()),
                    }
                }
            };
            if let Ok(outcome) = tokio::time::timeout(limit, wait).await {
                return outcome;
            }
            // Only the owner calls the model. A node that lost the lease (another fault took it)
            // has no model call to slow: said as such, as for a stalled renewal; a node that holds
            // the lease and made no slow call is a fault that did not take effect.
            let key = lease_key(&ctx.tenant);
            let holder = ctx.env.redis_cli("redis-primary", &["GET", &key]).await.unwrap_or_default();
            let holder = holder.trim();
            if holder.starts_with(&format!("{}/", n.node())) {
                return Err(format!(
                    "{} holds the lease but made no model call of {} ms or more within {} ms",
                    n.node(),
                    normal + extra,
                    limit.as_millis()
                ));
            }
            Ok(format!(
                "slow_model delivered; {} made no model call within {} ms and does not hold the lease (holder: {}), so no model call to slow",
                n.node(),
                limit.as_millis(),
                if holder.is_empty() { "nobody" } else { holder }
            ))
        }
        FaultKind::Crash => {
            let n = node.ok_or("no such node")?;
            n.signal(Signal::KILL).map_err(|e| e.to_string())?;
            for _ in 0..50 {
                if matches!(process_state(n.pid()), None | Some('Z')) {
                    return Ok(format!("SIGKILL; process {} gone", n.pid()));
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err("SIGKILL sent, but the process is still running".into())
        }
        FaultKind::KeyLoss => {
            let key = lease_key(&ctx.tenant);
            // GET and DEL in one exec: the holder named is the one whose key went.
            let out = env
                .redis_cli_batch("redis-primary", &format!("GET {key}\nDEL {key}\n"))
                .await
                .map_err(|e| e.to_string())?;
            let mut replies = out.lines().map(str::trim);
            let holder = replies.next().unwrap_or("").to_owned();
            let deleted = replies.next().unwrap_or("");
            if holder.is_empty() {
                return Ok("the key was absent when deleted: nobody held the lease, nothing was lost".into());
            }
            // The probe: a later read no longer shows that token (the key is gone, or re-taken).
            let now = env.redis_cli("redis-primary", &["GET", &key]).await.map_err(|e| e.to_string())?;
            if now.trim() == holder {
                return Err(format!("the key still holds {holder} after DEL (answered {deleted})"));
            }
            let now = if now.trim().is_empty() { "absent".to_owned() } else { format!("held by {}", now.trim()) };
            Ok(format!("deleted the lease key on redis-primary while {holder} held it; now {now}"))
        }
        FaultKind::ClockJump if f.target.is_some() => apply_node_clock(ctx, f, index, node).await,
        FaultKind::ClockJump => {
            let jump = f.jump_ms.unwrap_or(0);
            let seen = set_clock_offset(env, jump).await?;
            // The probe: Redis's own TIME, against the host's clock.
            if (seen - jump).abs() > 1000 {
                return Err(format!("asked for a {jump:+} ms jump, but Redis's TIME is {seen:+} ms off the host's"));
            }
            Ok(format!(
                "redis-primary's wall clock moved {jump:+} ms: its TIME is {seen:+} ms off the host's (keys expire on it)"
            ))
        }
        FaultKind::PauseWrites => {
            let ms = f.duration_ms().to_string();
            // The pause and its probe in one exec: under load a second `docker exec` once started
            // more than 1 s later, when too little of a 2 s pause was left for the probe's write to
            // block for its full second (a soak INCONCLUSIVE, issue 19). Inside the container the
            // probe follows the pause within milliseconds.
            // The probe: a write from another client blocks (busybox timeout ends it), a read answers.
            let script = "redis-cli --no-auth-warning -a \"$0\" CLIENT PAUSE \"$1\" WRITE; \
                          timeout 1 redis-cli --no-auth-warning -a \"$0\" SET leasequake:probe 1 >/dev/null 2>&1; \
                          echo write=$?; redis-cli --no-auth-warning -a \"$0\" PING";
            let out = env
                .exec("redis-primary", &["sh", "-c", script, env.redis_password(), &ms])
                .await
                .map_err(|e| e.to_string())?;
            let answer = out.lines().next().unwrap_or("").trim();
            if !answer.eq_ignore_ascii_case("ok") {
                return Err(format!("CLIENT PAUSE answered `{answer}`"));
            }
            let blocked = out.lines().any(|l| l.starts_with("write=") && l.trim() != "write=0");
            let reads = out.lines().any(|l| l.trim() == "PONG");
            match (blocked, reads) {
                (true, true) => Ok(format!("CLIENT PAUSE {ms} WRITE: a probe write blocked for 1 s, a PING answered")),
                _ => {
                    Err(format!("CLIENT PAUSE WRITE not in effect: the probe saw `{}`", out.trim().replace('\n', "; ")))
                }
            }
        }
        FaultKind::RedisRestart => {
            let docker = env.docker();
            let primary = env.container("redis-primary").ok_or("no redis-primary container")?.to_owned();
            let run_id = |info: String| {
                info.lines().find_map(|l| l.strip_prefix("run_id:")).map(|r| r.trim().to_owned()).unwrap_or_default()
            };
            let before = run_id(env.redis_cli("redis-primary", &["INFO", "server"]).await.map_err(|e| e.to_string())?);
            let began = Instant::now();
            docker.kill_container(&primary, Some(stop_signal("SIGKILL"))).await.map_err(|e| e.to_string())?;
            // Bounded: the container must be seen stopped before it is started again.
            for _ in 0..100 {
                let running =
                    docker.inspect_container(&primary, None).await.ok().and_then(|i| i.state).and_then(|s| s.running);
                if running != Some(true) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            docker.start_container(&primary, None).await.map_err(|e| e.to_string())?;
            // The probe: a new Redis process (another run_id) answers, with an empty dataset.
            while began.elapsed() < Duration::from_secs(15) {
                if let Ok(info) = env.redis_cli("redis-primary", &["INFO", "server"]).await {
                    let after = run_id(info);
                    if !after.is_empty() && after != before {
                        return Ok(format!(
                            "redis-primary killed and started again in {} ms: run_id {} -> {} (no persistence: its \
                             dataset, the lease key and the fence counter, started empty)",
                            began.elapsed().as_millis(),
                            &before[..8.min(before.len())],
                            &after[..8.min(after.len())]
                        ));
                    }
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err("redis-primary did not come back with a new process within 15 s".into())
        }
        FaultKind::Failover => {
            use testcontainers::bollard::models::NetworkDisconnectRequest;
            let docker = env.docker();
            let primary = env.container("redis-primary").ok_or("no redis-primary container")?.to_owned();
            let isolate = f.mode == Some(Mode::Isolate);
            let manual = f.mode == Some(Mode::Manual);
            let began = Instant::now();
            if manual {
                let answer = env
                    .redis_cli("sentinel-1", &["SENTINEL", "FAILOVER", crate::env::MASTER_NAME])
                    .await
                    .map_err(|e| e.to_string())?;
                if !answer.trim().eq_ignore_ascii_case("ok") {
                    return Err(format!("SENTINEL FAILOVER answered `{}`", answer.trim()));
                }
            } else if isolate {
                let req = NetworkDisconnectRequest { container: primary, force: Some(true) };
                docker.disconnect_network(&env.network("repl"), req).await.map_err(|e| e.to_string())?;
            } else {
                // SIGSTOP, not `docker pause`: a `docker exec` (the observer's) racing a cgroup
                // freeze leaves `runc init` frozen inside it and hangs the Docker daemon (seen
                // here on 20.10); a stopped process freezes Redis alike and leaves exec working.
                docker.kill_container(&primary, Some(stop_signal("SIGSTOP"))).await.map_err(|e| e.to_string())?;
            }
            // An acknowledged acquisition that can never replicate: the key goes on the cut primary,
            // and the next acquire (the nodes retry every few ms) lands there alone.
            let mut unreplicated = None;
            if isolate && f.unreplicated_acquire == Some(true) {
                let key = lease_key(&ctx.tenant);
                let before = env.redis_cli("redis-primary", &["GET", &key]).await.map_err(|e| e.to_string())?;
                env.redis_cli("redis-primary", &["DEL", &key]).await.map_err(|e| e.to_string())?;
                let asked = Instant::now();
                while asked.elapsed() < Duration::from_secs(3) {
                    let now = env.redis_cli("redis-primary", &["GET", &key]).await.unwrap_or_default();
                    let now = now.trim();
                    if !now.is_empty() && now != before.trim() {
                        unreplicated = Some(now.to_owned());
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                if unreplicated.is_none() {
                    return Err("no node acquired on the cut primary within 3 s of its key being deleted".into());
                }
            }
            // The probe: the replica itself says it is master now. Bounded by Sentinel's timings.
            let sentinel = &ctx.s.sentinel;
            let limit = Duration::from_millis(sentinel.down_after_ms + sentinel.failover_timeout_ms + 10_000);
            while !env.redis_cli("redis-replica", &["ROLE"]).await.unwrap_or_default().starts_with("master") {
                if began.elapsed() > limit {
                    return Err(format!("Sentinel did not promote redis-replica within {} ms", limit.as_millis()));
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let promoted_ms = began.elapsed().as_millis();
            // What the new primary knows of the lease (an acknowledged, unreplicated key is lost).
            let key = lease_key(&ctx.tenant);
            let new_holder = env.redis_cli("redis-replica", &["GET", &key]).await.unwrap_or_default();
            let lost = match &unreplicated {
                // The probe of the loss: what the cut primary acknowledged is not on the new one.
                Some(y) => {
                    let old = env.redis_cli("redis-primary", &["GET", &key]).await.unwrap_or_default();
                    let old = old.trim();
                    if old.is_empty() || old == new_holder.trim() {
                        return Err(format!(
                            "the cut primary holds `{old}` and the new primary the same: no acknowledged lease was lost"
                        ));
                    }
                    format!(
                        "; the cut primary holds {old} (acknowledged there after the cut: {y} acquired first), the new \
                         primary does not: that lease is lost"
                    )
                }
                None => String::new(),
            };
            let new_holder =
                if new_holder.trim().is_empty() { "no lease key".to_owned() } else { new_holder.trim().to_owned() };
            // Each node's proxy follows at its own delay from the promotion, the earliest first.
            let never = f.never_follow.clone().unwrap_or_default();
            let followers = follow_delays(f, ctx.s.nodes.count);
            let promoted = Instant::now();
            let mut followed: Vec<(String, u64)> = Vec::new();
            for (n, delay) in followers {
                tokio::time::sleep_until((promoted + Duration::from_millis(delay)).into()).await;
                proxy.set_upstream(&format!("{n}-redis"), "redis-replica:6379").await.map_err(|e| e.to_string())?;
                followed.push((n, promoted.elapsed().as_millis() as u64));
            }
            let uniform = f.follow_ms_by_node.as_ref().is_none_or(std::collections::BTreeMap::is_empty);
            let follow = if followed.is_empty() {
                "no node's Redis proxy follows it".to_owned()
            } else if uniform {
                let names: Vec<&str> = followed.iter().map(|(n, _)| n.as_str()).collect();
                format!("the Redis proxies of {} follow it after {} ms", names.join(", "), f.follow_ms.unwrap_or(0))
            } else {
                let each: Vec<String> = followed.iter().map(|(n, ms)| format!("{n} after {ms} ms")).collect();
                format!("the Redis proxies follow it each at its own delay: {}", each.join(", "))
            };
            let stale = match never.len() {
                0 => String::new(),
                1 => format!("; {} stays on the old primary", never[0]),
                _ => format!("; {} stay on the old primary", never.join(", ")),
            };
            Ok(format!(
                "redis-replica is master {promoted_ms} ms after the primary was {} (it holds {new_holder}){lost}; \
                 {follow}{stale}",
                if manual {
                    "handed over (SENTINEL FAILOVER)"
                } else if isolate {
                    "cut from replication"
                } else {
                    "stopped (SIGSTOP)"
                },
            ))
        }
        FaultKind::SlowStore | FaultKind::FailingStore => {
            // Every node's store proxy: the store itself is slow or failing, for everyone.
            let slow = f.kind == FaultKind::SlowStore;
            let latency = f.latency_ms.unwrap_or(0);
            for i in 1..=ctx.s.nodes.count {
                let toxic = if slow {
                    ToxicSpec::latency(Stream::Downstream, latency, 0)
                } else {
                    ToxicSpec::reset_peer(Stream::Downstream, 0)
                };
                proxy
                    .add_toxic(&format!("n{i}-store"), &toxic.named(toxic_name(id)))
                    .await
                    .map_err(|e| e.to_string())?;
            }
            // Probe through a store proxy that carries no other fault's toxic (faults overlap); if
            // every one does, the effect of this one cannot be told apart: not verified.
            let mut clean = None;
            for i in 1..=ctx.s.nodes.count {
                let name = format!("n{i}-store");
                if let Ok((200, body)) = proxy.request("GET", &format!("/proxies/{name}/toxics"), None).await {
                    let toxics: Vec<serde_json::Value> = serde_json::from_str(&body).unwrap_or_default();
                    if toxics.iter().all(|t| t["name"] == toxic_name(id).as_str()) {
                        clean = Some((i, name));
                        break;
                    }
                }
            }
            let Some((i, probe_name)) = clean else {
                return Err(
                    "every store proxy also carries another fault's toxic: this one's effect cannot be probed".into()
                );
            };
            let port = env.proxy_ports[2 * (i as usize - 1) + 1];
            if slow {
                let t = Instant::now();
                let answer =
                    leasequake_toxiproxy::http::exchange(&format!("127.0.0.1:{port}"), "GET", "/v1/health", None).await;
                let took = t.elapsed().as_millis() as u64;
                match answer {
                    Ok((200, _)) if took >= latency => {
                        Ok(format!("store health answered in {took} ms through {probe_name} (>= {latency} ms)"))
                    }
                    other => Err(format!(
                        "the probe through {probe_name} answered {other:?} in {took} ms, expected >= {latency} ms"
                    )),
                }
            } else {
                match probe(port).await {
                    got @ ("reset" | "closed" | "refused") => Ok(format!("{probe_name}: probe {got}")),
                    got => Err(format!("{probe_name}: the probe got `{got}` through a failing store")),
                }
            }
        }
    }
}

/// Sets the primary's clock offset (the clock shim's file, see harness/clockshim) and returns how
/// far Redis's `TIME` then is from the host's clock, in ms.
async fn set_clock_offset(env: &Environment, offset_ms: i64) -> Result<i64, String> {
    // Fixed width, space padded: the shim reads the leading number through a shared mapping.
    let text = format!("{:<32}", format!("{offset_ms:+}"));
    let script =
        format!("printf '%s' \"$0\" | busybox dd of={} conv=notrunc 2>/dev/null", crate::image::CLOCK_OFFSET_FILE);
    env.exec("redis-primary", &["sh", "-c", &script, &text]).await.map_err(|e| e.to_string())?;
    let before = unix_ms();
    let time = env.redis_cli("redis-primary", &["TIME"]).await.map_err(|e| e.to_string())?;
    let after = unix_ms();
    let mut parts = time.lines().map(str::trim);
    let (Some(Ok(s)), Some(Ok(us))) = (parts.next().map(str::parse::<i64>), parts.next().map(str::parse::<i64>)) else {
        return Err(format!("TIME answered `{}`", time.trim()));
    };
    Ok(s * 1000 + us / 1000 - (before + after) / 2)
}

fn unix_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// Verifies a stalled renewal from Redis itself: if `node` holds the key, its remaining ttl must
/// fall below what renewals every `renew_ms` would keep (ttl - 1.5 renewal intervals), or the key
/// must leave it. A node that holds nothing has no renewal to observe: that is said, not hidden.
async fn verify_stalled(ctx: &Ctx<'_>, node: &str) -> Result<String, String> {
    let (ttl, renew) = (ctx.s.lease.ttl_ms, ctx.s.renew_ms());
    let floor = ttl.saturating_sub(renew * 3 / 2);
    let key = lease_key(&ctx.tenant);
    let prefix = format!("{node}/");
    let began = Instant::now();
    let mut last = String::new();
    // The lease seen first: a node whose stalled lease expired may acquire a new one at once
    // (same node, new token); on a loaded machine the samples can miss the gap between them.
    let mut stalled: Option<String> = None;
    // Bounded: one ttl plus a second.
    while began.elapsed() < Duration::from_millis(ttl + 1000) {
        // GET and PTTL in one exec, so both describe the same moment.
        let out = ctx
            .env
            .redis_cli_batch("redis-primary", &format!("GET {key}\nPTTL {key}\n"))
            .await
            .map_err(|e| e.to_string())?;
        let mut replies = out.lines().map(str::trim);
        let holder = replies.next().unwrap_or("");
        let same = stalled.as_deref().is_none_or(|s| s == holder);
        if !holder.starts_with(&prefix) || !same {
            let holder = if holder.is_empty() { "nobody" } else { holder };
            return Ok(if stalled.is_none() {
                format!(
                    "stall_renewal delivered; {node} does not hold the lease (holder: {holder}), so no renewal to stop"
                )
            } else {
                format!("the key left {node} {} ms after the stall (holder now: {holder})", began.elapsed().as_millis())
            });
        }
        stalled.get_or_insert_with(|| holder.to_owned());
        let pttl: i64 = replies.next().and_then(|t| t.parse().ok()).unwrap_or(-2);
        if pttl >= 0 && (pttl as u64) < floor {
            return Ok(format!(
                "{node}'s key was not renewed: PTTL {pttl} ms < {floor} ms, {} ms after the stall",
                began.elapsed().as_millis()
            ));
        }
        last = format!("PTTL {pttl} ms");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    Err(format!("{node} still renews its lease {} ms after the stall ({last})", began.elapsed().as_millis()))
}

/// Undoes one fault; returns what was done (a detail containing "failed" means it may remain).
/// How undoing a fault went.
enum Heal {
    /// Undone; what was seen.
    Done(String),
    /// Undone, but the environment did not settle after it (the old primary stayed a master):
    /// the verdict cannot stand on this environment.
    Unsettled(String),
    /// Not undone: the fault may still be in effect.
    Failed(String),
}

impl Heal {
    fn done(what: &str) -> Self {
        Self::Done(what.to_owned())
    }
    /// What the heal line says.
    fn detail(&self) -> String {
        match self {
            Self::Done(d) => d.clone(),
            Self::Unsettled(d) => format!("settling failed: {d}"),
            Self::Failed(d) => d.clone(),
        }
    }
}

async fn heal(
    ctx: &Ctx<'_>,
    a: &Applied,
    settle: bool,
    nodes: &mut BTreeMap<u32, (NodeProcess, u64)>,
    handles: &Mutex<BTreeMap<u32, NodeHandle>>,
) -> Heal {
    let proxy = &ctx.proxy;
    match a.fault.kind {
        FaultKind::Partition => {
            let mut failed = Vec::new();
            for (name, _) in proxies_of(a.index, a.fault.link) {
                match proxy.remove_toxic(&name, &toxic_name(a.id)).await {
                    Ok(()) => {}
                    Err(e) if e.to_string().contains("404") || e.to_string().contains("not found") => {}
                    Err(e) => failed.push(format!("{name}: {e}")),
                }
            }
            if failed.is_empty() {
                Heal::Done("toxics removed".into())
            } else {
                Heal::Failed(format!("removing toxics failed: {}", failed.join("; ")))
            }
        }
        FaultKind::Pause => match nodes.get(&a.index) {
            Some((n, _)) => n
                .signal(Signal::CONT)
                .map_or_else(|e| Heal::Failed(format!("SIGCONT failed: {e}")), |()| Heal::done("SIGCONT")),
            None => Heal::done("no such node"),
        },
        FaultKind::StallRenewal => Heal::done("the stall ends by itself"),
        FaultKind::SlowModel => match nodes.get(&a.index) {
            Some((n, _)) => n.send(NodeCommand::SlowModel { ms: 0 }).map_or_else(
                |e| Heal::Failed(format!("restoring the model speed failed: {e}")),
                |()| Heal::done("model speed restored"),
            ),
            None => Heal::done("no such node"),
        },
        FaultKind::RedisRestart => Heal::done("nothing to undo: the data is gone for good"),
        FaultKind::KeyLoss => Heal::done("nothing to undo: the key is gone"),
        FaultKind::ClockJump if a.fault.target.is_some() => {
            let file = ctx.node_clock_file(a.index);
            match write_clock_offset(&file, 0) {
                Ok(()) => Heal::Done(format!("{}'s wall clock set back to the host's", a.target)),
                Err(e) => Heal::Failed(format!(
                    "setting {}'s clock back failed: cannot write {}: {e}",
                    a.target,
                    file.display()
                )),
            }
        }
        FaultKind::ClockJump => match set_clock_offset(ctx.env, 0).await {
            Ok(seen) => Heal::Done(format!("clock set back to the host's (TIME now {seen:+} ms off)")),
            Err(e) => Heal::Failed(format!("setting the clock back failed: {e}")),
        },
        FaultKind::PauseWrites => match ctx.env.redis_cli("redis-primary", &["CLIENT", "UNPAUSE"]).await {
            Ok(a) if a.trim().eq_ignore_ascii_case("ok") => Heal::done("CLIENT UNPAUSE"),
            Ok(a) => Heal::Failed(format!("CLIENT UNPAUSE failed: `{}` (the pause ends by itself)", a.trim())),
            Err(e) => Heal::Failed(format!("CLIENT UNPAUSE failed: {e} (the pause ends by itself)")),
        },
        FaultKind::Failover => {
            use testcontainers::bollard::models::{EndpointSettings, NetworkConnectRequest};
            let env = ctx.env;
            let Some(primary) = env.container("redis-primary") else { return Heal::done("no redis-primary container") };
            if a.fault.mode == Some(Mode::Manual) {
                // Nothing to undo, but Sentinel demotes the old primary itself, and at load 17
                // that took 11.5 s (7.5 s after a 4 s fault had healed): the role change then
                // fell outside the fault and read as drift. The heal lasts until it is done.
                return if settle {
                    demoted(ctx).await
                } else {
                    Heal::done("nothing to undo: Sentinel makes the old primary a replica itself")
                };
            }
            let back = if a.fault.mode == Some(Mode::Isolate) {
                let req = NetworkConnectRequest {
                    container: primary.to_owned(),
                    endpoint_config: Some(EndpointSettings {
                        aliases: Some(crate::env::net_aliases("redis-primary", "repl")),
                        ..Default::default()
                    }),
                };
                env.docker().connect_network(&env.network("repl"), req).await
            } else {
                env.docker().kill_container(primary, Some(stop_signal("SIGCONT"))).await
            };
            match back {
                Ok(()) if settle => demoted(ctx).await,
                Ok(()) => Heal::done("the old primary is back (Sentinel demotes it to a replica within seconds)"),
                Err(e) => Heal::Failed(format!("bringing the old primary back failed: {e}")),
            }
        }
        FaultKind::LoseReplies => {
            let _ = proxy.remove_toxic(&format!("n{}-redis", a.index), &toxic_name(a.id)).await;
            Heal::done("toxic removed")
        }
        FaultKind::SlowRedis => {
            for (k, _) in slow_redis_streams(&a.fault).iter().enumerate() {
                let _ = proxy.remove_toxic(&format!("n{}-redis", a.index), &slow_redis_toxic(a.id, k)).await;
            }
            Heal::done("toxics removed")
        }
        FaultKind::SlowStore | FaultKind::FailingStore => {
            for i in 1..=ctx.s.nodes.count {
                let _ = proxy.remove_toxic(&format!("n{i}-store"), &toxic_name(a.id)).await;
            }
            Heal::done("toxics removed")
        }
        FaultKind::Crash => {
            let incarnation = nodes.get(&a.index).map_or(1, |n| n.1) + 1;
            match ctx.spawn(a.index, incarnation) {
                Ok(n) => {
                    handles.lock().unwrap_or_else(PoisonError::into_inner).insert(a.index, n.handle());
                    nodes.insert(a.index, (n, incarnation));
                    Heal::Done(format!("restarted as incarnation {incarnation}"))
                }
                Err(e) => Heal::Failed(format!("restart failed: {e}")),
            }
        }
    }
}

/// Waits until Sentinel has demoted the old primary that came back: until then it answers as a
/// master beside the new one (split brain, ~11 s measured), and the fault is not over. The heal is
/// stamped when the topology is whole again, so the liveness bound counts from there. Bounded by
/// Sentinel's timings; a topology that never settles is said so (the environment drifted).
async fn demoted(ctx: &Ctx<'_>) -> Heal {
    let began = Instant::now();
    let sentinel = &ctx.s.sentinel;
    let limit = Duration::from_millis(sentinel.down_after_ms + sentinel.failover_timeout_ms + 20_000);
    loop {
        let role = ctx.env.redis_cli("redis-primary", &["ROLE"]).await.unwrap_or_default();
        if role.starts_with("slave") {
            return Heal::Done(format!(
                "the old primary is back; Sentinel demoted it to a replica {} ms later",
                began.elapsed().as_millis()
            ));
        }
        if began.elapsed() > limit {
            return Heal::Unsettled(format!(
                "the old primary is back but still a master {} ms later (the topology did not settle)",
                limit.as_millis()
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The nodes whose Redis proxies follow a failover's new primary, with each one's delay (ms after
/// the promotion), earliest first: `follow_ms_by_node`, else `follow_ms`, else at once; never the
/// `never_follow` nodes.
fn follow_delays(f: &Fault, nodes: u32) -> Vec<(String, u64)> {
    let never = f.never_follow.clone().unwrap_or_default();
    let mut out: Vec<(String, u64)> = (1..=nodes)
        .map(|i| format!("n{i}"))
        .filter(|n| !never.contains(n))
        .map(|n| {
            let own = f.follow_ms_by_node.as_ref().and_then(|m| m.get(&n).copied());
            let delay = own.or(f.follow_ms).unwrap_or(0);
            (n, delay)
        })
        .collect();
    out.sort_by_key(|(n, d)| (*d, node_index(n)));
    out
}

#[cfg(test)]
mod tests;
