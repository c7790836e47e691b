//! The runner: one scenario, one environment (fresh, or an attached running one). Gives each node
//! a Redis proxy and a store proxy, starts the nodes, samples the lease key on every Redis
//! instance, applies the fault schedule (faults may overlap; each is verified by an independent
//! probe and healed at its own time), then records the history, runs the checker, and takes
//! everything down. An interrupt (Ctrl-C, SIGTERM, `--max-duration`) heals what is applied,
//! records what was seen, and makes the verdict inconclusive at best.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use leasequake_reports::history::{
    EventKind, Header, HistoryLine, LeaseTimings, NodeCommand, NodeConfig, PipelineShape, Snapshot, HISTORY_VERSION,
    PROTOCOL_VERSION, PROTOCOL_VERSION_MIN,
};
use leasequake_reports::CheckResult;
use leasequake_toxiproxy::Client as ProxyClient;
use tokio::sync::{broadcast, mpsc};
use tokio_util::sync::CancellationToken;
use tracing::{info, Instrument};

use crate::check::check;
use crate::clock::mono_ns;
use crate::env::{EnvConfig, Environment, NodeLink};
use crate::error::HarnessError;
use crate::fault;
use crate::history::{seal, write, write_atomically, HISTORY_FILE, VERDICTS_FILE};
use crate::holders::Holders;
use crate::image::{ensure, resolve, ImageSpec};
use crate::progress::Progress;
use crate::recorder::{collect, read_audit, read_model, read_wire, temporary_collections_left, Recorder};
use crate::scenario::{Fault, FaultKind, Observed, Scenario, Trigger};
use crate::supervisor::{NodeHandle, NodeProcess, Received};
use crate::trigger::{fire, fire_observed, follow_master, Armed, Hit};
use timeline::Timeline;

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

impl Attach {
    /// Environment `run_id` (an `env up` run id, or docker-compose.yml's `compose`), its Redis
    /// password read from `file`, else from the file `env up` wrote, else from
    /// LEASEQUAKE_REDIS_PASSWORD.
    pub fn resolve(run_id: &str, file: Option<&Path>) -> Result<Self, HarnessError> {
        let default = crate::env::password_file(run_id);
        let from_file = |f: &Path| {
            std::fs::read_to_string(f)
                .map(|p| p.trim().to_owned())
                .map_err(|e| HarnessError::usage(format!("cannot read the Redis password file {}: {e}", f.display())))
        };
        let password = match file {
            Some(f) => from_file(f)?,
            None if default.exists() => from_file(&default)?,
            None => std::env::var("LEASEQUAKE_REDIS_PASSWORD").map_err(|_| {
                HarnessError::usage(format!(
                    "no Redis password for environment {run_id}: {} does not exist (is it an `env up` run id?). \
                     Fix: pass --redis-password-file, or set LEASEQUAKE_REDIS_PASSWORD (docker-compose.yml: \
                     leasequake-dev unless you set REDIS_PASSWORD)",
                    default.display()
                ))
            })?,
        };
        Ok(Self { run_id: run_id.to_owned(), password })
    }
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
        let port = |link| self.env.node_port(i, link);
        let links = Links {
            redis_url: format!("redis://:{}@127.0.0.1:{}/", self.env.redis_password(), port(NodeLink::Redis)),
            store_addr: format!("127.0.0.1:{}", port(NodeLink::Store)),
            model_addr: Some(format!("127.0.0.1:{}", port(NodeLink::Model))),
        };
        node_config(self.s, &self.faults, self.seed, &self.tenant, (i, incarnation), links)
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

    /// What the faults act on and probe through.
    fn world<'w>(&'w self, lease: &'w Holders) -> fault::World<'w> {
        fault::World { s: self.s, env: self.env, proxy: &self.proxy, dir: self.dir, lease, events: &self.events }
    }

    /// The environment a node starts with: only when the schedule moves a node's wall clock, the
    /// clock shim preloaded (after any LD_PRELOAD of the caller's) and the node's own offset file.
    fn node_env(&self, i: u32) -> Result<Vec<(String, String)>, HarnessError> {
        if !self.moves_node_clocks() {
            return Ok(Vec::new());
        }
        let shim = crate::image::clock_shim()?;
        let file = fault::clock_file(self.dir, i);
        if !file.exists() {
            fault::write_clock_offset(&file, 0)
                .map_err(|e| env_err(format!("cannot create {}: {e}", file.display())))?;
        }
        let preload = match std::env::var("LD_PRELOAD") {
            Ok(p) if !p.is_empty() => format!("{p}:{}", shim.display()),
            _ => shim.display().to_string(),
        };
        Ok(vec![("LD_PRELOAD".into(), preload), ("LEASEQUAKE_CLOCK_FILE".into(), file.display().to_string())])
    }
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

/// The nodes of a run: their processes, and the handles the router and the faults reach them by.
struct Fleet<'c> {
    ctx: &'c Ctx<'c>,
    nodes: BTreeMap<u32, (NodeProcess, u64)>,
    handles: Arc<Mutex<BTreeMap<u32, NodeHandle>>>,
}

impl<'c> Fleet<'c> {
    /// Starts every node as its first incarnation.
    fn start(ctx: &'c Ctx<'c>) -> Result<Self, HarnessError> {
        let mut fleet = Self { ctx, nodes: BTreeMap::new(), handles: Arc::default() };
        for i in 1..=ctx.s.nodes.count {
            let n = ctx.spawn(i, 1)?;
            fleet.handles.lock().unwrap_or_else(PoisonError::into_inner).insert(i, n.handle());
            fleet.nodes.insert(i, (n, 1));
        }
        Ok(fleet)
    }

    async fn stop(self) {
        for (_, (n, _)) in self.nodes {
            n.stop(Duration::from_secs(5)).await;
        }
    }
}

impl fault::Nodes for Fleet<'_> {
    fn handle(&self, index: u32) -> Option<NodeHandle> {
        self.handles.lock().unwrap_or_else(PoisonError::into_inner).get(&index).cloned()
    }

    fn restart(&mut self, index: u32) -> Result<u64, String> {
        let incarnation = self.nodes.get(&index).map_or(1, |n| n.1) + 1;
        let n = self.ctx.spawn(index, incarnation).map_err(|e| e.to_string())?;
        self.handles.lock().unwrap_or_else(PoisonError::into_inner).insert(index, n.handle());
        self.nodes.insert(index, (n, incarnation));
        Ok(incarnation)
    }
}

/// A Redis, a store and a model proxy per node (an attached environment's old ones replaced).
async fn create_proxies(env: &Environment, proxy: &ProxyClient, count: u32) -> Result<(), HarnessError> {
    for i in 1..=count {
        for link in NodeLink::ALL {
            let (name, listen, upstream) = (link.proxy(i), format!("0.0.0.0:{}", link.listen_port(i)), link.upstream());
            let upstream = upstream.as_str();
            if env.attached() {
                // A run before this one may have left its proxies (and their toxics).
                let _ = proxy.delete_proxy(&name).await;
            }
            proxy
                .create_proxy(&name, &listen, upstream)
                .await
                .map_err(|e| env_err(format!("the fault proxy refused a request: {e}")))?;
        }
    }
    Ok(())
}

/// Every node's proxies, by name (`n1-redis`, `n1-store`, `n1-model`, ...).
fn links(count: u32) -> Vec<String> {
    (1..=count).flat_map(|i| NodeLink::ALL.map(|l| l.proxy(i))).collect()
}

/// The store's and the model service's audit sequence numbers before this run: their audit
/// lines are those after them.
async fn audit_seqs(env: &Environment) -> Result<(u64, u64), HarnessError> {
    let (status, body) = leasequake_toxiproxy::http::exchange(&env.store_addr, "GET", "/v1/health", None)
        .await
        .map_err(|e| env_err(format!("the store does not answer its health check: {e}")))?;
    let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
    match (status, v["audit_seq"].as_u64(), v["model_seq"].as_u64()) {
        (200, Some(audit), Some(model)) => Ok((audit, model)),
        _ => Err(env_err(format!("the store's health answer has no audit_seq and model_seq: {status} {body}"))),
    }
}

fn header(ctx: &Ctx<'_>, opts: &RunOptions, audit_after: u64) -> Header {
    let mut h = scenario_header(ctx.s, ctx.seed, &ctx.env.run_id, &ctx.tenant, mono_ns(), audit_after);
    h.node_command = opts.node_cmd.clone().or_else(|| ctx.s.nodes.command.clone());
    h
}

/// Where a node reaches Redis, the store and the model service.
pub(crate) struct Links {
    pub redis_url: String,
    pub store_addr: String,
    pub model_addr: Option<String>,
}

/// Node `i`'s configuration (incarnation `incarnation`) for scenario `s` with schedule `faults`:
/// what the runner sends a node process and what the simulation hands its nodes.
pub(crate) fn node_config(
    s: &Scenario,
    faults: &[Fault],
    seed: u64,
    tenant: &str,
    (i, incarnation): (u32, u64),
    links: Links,
) -> NodeConfig {
    let mut sync_points: Vec<u8> = faults
        .iter()
        .filter_map(|f| match f.trigger() {
            Some(Trigger::Checkpoint(n)) => Some(n),
            _ => None,
        })
        .collect();
    sync_points.sort_unstable();
    sync_points.dedup();
    NodeConfig {
        protocol: PROTOCOL_VERSION_MIN,
        protocol_max: Some(PROTOCOL_VERSION),
        node: format!("n{i}"),
        incarnation,
        tenant: tenant.to_owned(),
        redis_url: links.redis_url,
        store_addr: links.store_addr,
        model_addr: links.model_addr,
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
            sync_points,
            pause_ms: s.pipeline.pause_ms,
            store_timeout_ms: (s.lease.ttl_ms * 2).max(2000),
        },
        fence_source: s.store.fence_source,
        seed: seed ^ u64::from(i).wrapping_mul(0x9e37_79b9_7f4a_7c15),
    }
}

/// The history's header for a run of `s` with `seed` (the runner's and the simulation's).
pub(crate) fn scenario_header(
    s: &Scenario,
    seed: u64,
    run_id: &str,
    tenant: &str,
    started_ns: u64,
    audit_after: u64,
) -> Header {
    Header {
        version: HISTORY_VERSION,
        run_id: run_id.to_owned(),
        scenario: s.name.clone(),
        seed,
        tenant: tenant.to_owned(),
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
        node_command: s.nodes.command.clone(),
        clients_follow: s.nodes.follow_failovers,
        round_estimate_ms: Some(s.round_estimate_ms()),
        model_after: 0,
        witness: false,
    }
}

/// What the router listens to and whom it tells.
struct Routes {
    armed: Arc<Mutex<Vec<Armed>>>,
    handles: Arc<Mutex<BTreeMap<u32, NodeHandle>>>,
    /// Sentinel-aware clients: every node's Redis proxy follows a new master the observer sees.
    follower: Option<(ProxyClient, u32)>,
    seen: mpsc::Receiver<Observed>,
    events: broadcast::Receiver<Arc<Received>>,
    hits: mpsc::Sender<Hit>,
}

/// The router: hears every node event and every change the observer saw; a sync point or an
/// event an armed fault waits for is handed to the timeline, which applies the fault before the
/// node is let go. Bounded by the run (`stop`) and by the event stream.
async fn route(mut r: Routes, stop: CancellationToken) {
    loop {
        let received = tokio::select! {
            () = stop.cancelled() => break,
            Some(seen) = r.seen.recv() => {
                if let Some((proxy, count)) = &r.follower {
                    follow_master(proxy, *count, &seen).await;
                }
                fire_observed(&r.armed, &seen, &r.hits).await;
                continue;
            }
            got = r.events.recv() => match got {
                Ok(got) => got,
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => break,
            },
        };
        let Ok(ev) = &received.line else { continue };
        // Every fault armed for this event fires on it (a clock step and a stalled renewal can
        // land right after the same acquire), in the order they were armed.
        fire(&r.armed, &r.hits, |t| t.fired_by(&ev.kind), &received.node).await;
        if let EventKind::SyncPoint { number: n, .. } = ev.kind {
            let h = r.handles.lock().unwrap_or_else(PoisonError::into_inner).get(&node_index(&received.node)).cloned();
            if let Some(h) = h {
                let _ = h.send(NodeCommand::Go { checkpoint: n });
            }
        }
    }
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
    create_proxies(env, &proxy, s.nodes.count).await?;
    let (audit_after, model_after) = audit_seqs(env).await?;
    // Our proxy witnesses every link; the official Toxiproxy has no witness (the wire properties
    // then read "not applicable").
    let witness = matches!(proxy.witness("n1-redis", u64::MAX).await, Ok(Some(_)));
    if witness && env.attached() {
        // Scripts an earlier run loaded stay in Redis's cache, and this run's nodes would run them
        // by SHA1 alone, out of the witness's sight: flushed, each is loaded again where it sees.
        for role in ["redis-primary", "redis-replica"] {
            env.redis_cli(role, &["SCRIPT", "FLUSH"]).await?;
        }
    }
    let (tx, rx) = mpsc::channel::<Received>(65_536);
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
    let mut head = header(&ctx, opts, audit_after);
    head.witness = witness;
    head.model_after = model_after;
    let lines = Recorder::new(HistoryLine::Header(head));
    let router_rx = ctx.events.subscribe();
    let mut fleet = Fleet::start(&ctx)?;
    opts.progress.phase(&format!("running ({} nodes, {} s)", s.nodes.count, s.duration_s));
    let lease = Arc::new(Holders::new(&ctx.tenant, s.nodes.count));
    let collector = tokio::spawn(collect(rx, lines.clone(), lease.clone(), events));

    // The observer (who holds the key on each instance) and what it saw, for the triggers that
    // follow it (`key_expired`, `role_changed`); the environment's own changes (containers,
    // Sentinels, proxies); the router; the timeline. All stop when the timeline is done.
    let stop = CancellationToken::new();
    let (seen_tx, seen_rx) = mpsc::channel::<Observed>(64);
    let pushed = |l: HistoryLine| lines.push(l);
    let world = ctx.world(&lease);
    let observer = crate::observer::observe(env, &lease, &pushed, seen_tx, &stop);
    let watcher = crate::watch::watch(env, s.nodes.count, &pushed, &stop);
    let armed: Arc<Mutex<Vec<Armed>>> = Arc::default();
    let (hits, hit_rx) = mpsc::channel::<Hit>(16);
    let wire_triggers = crate::trigger::wire_renewals(&ctx.proxy, &lease, s.nodes.count, (&armed, &hits), &stop);
    let routes = Routes {
        armed: armed.clone(),
        handles: fleet.handles.clone(),
        follower: s.nodes.follow_failovers.then(|| (ProxyClient::new(env.proxy_api.clone()), s.nodes.count)),
        seen: seen_rx,
        events: router_rx,
        hits: hits.clone(),
    };
    let router = route(routes, stop.clone());
    let timeline = Timeline::new(&ctx, &world, &lines, &opts.progress, &armed);
    let schedule = async {
        let out = timeline.run(&mut fleet, hit_rx, &cancel).await;
        stop.cancel();
        out
    };
    let ((still_applied, extended_ms), (), (), (), ()) =
        tokio::join!(schedule, observer, router, watcher, wire_triggers);
    opts.progress.phase("stopping the nodes");
    fleet.stop().await;
    let Ctx { proxy, tx, tenant, .. } = ctx;
    drop(tx);
    let _ = tokio::time::timeout(Duration::from_secs(5), collector).await;

    opts.progress.phase("reading the store's audit log");
    for line in read_audit(env, audit_after).await?.into_iter().chain(read_model(env, model_after).await?) {
        lines.push(line);
    }
    let (wire, witness_gaps) =
        if witness { read_wire(&proxy, &links(s.nodes.count)).await } else { Default::default() };
    for line in wire {
        lines.push(line);
    }
    let left = temporary_collections_left(env, &tenant).await;
    if env.attached() {
        for i in 1..=s.nodes.count {
            for link in NodeLink::ALL {
                let _ = proxy.delete_proxy(&link.proxy(i)).await;
            }
        }
    }
    lines.push(HistoryLine::Snapshot(Snapshot {
        ended_ns: mono_ns(),
        faults_still_applied: still_applied,
        temporary_collections_left: left,
        versions: BTreeMap::from([("harness".to_owned(), env!("CARGO_PKG_VERSION").to_owned())]),
        extended_ms,
        witness_gaps,
        stopped: interrupt.reason().map(|r| format!("the run was stopped early: {r}; the history holds what was seen")),
        seal: None,
    }));
    let mut lines = lines.take();
    seal(&mut lines);
    write(&dir.join(HISTORY_FILE), &lines)?;
    opts.progress.phase("checking the history");
    Ok((judge(&lines, dir)?, extended_ms))
}

/// The checker's verdict on the history (inconclusive at best if the run was stopped early: its
/// snapshot says so), written to verdicts.json.
fn judge(lines: &[HistoryLine], dir: &Path) -> Result<CheckResult, HarnessError> {
    let result = check(lines);
    let json = serde_json::to_vec_pretty(&result)
        .map_err(|e| HarnessError::History { path: dir.to_path_buf(), detail: e.to_string() })?;
    write_atomically(&dir.join(VERDICTS_FILE), &json)?;
    Ok(result)
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

/// `n3` -> 3 (0 for anything else, which names no node).
fn node_index(target: &str) -> u32 {
    target.strip_prefix('n').and_then(|n| n.parse().ok()).unwrap_or(0)
}

fn resolve_target(f: &Fault, lease: &Holders, count: u32) -> String {
    let owner = || lease.owner();
    match f.target.as_deref() {
        Some("owner") => owner().unwrap_or_else(|| "n1".into()),
        Some("non-owner") => {
            let o = owner().unwrap_or_default();
            (1..=count).map(|i| format!("n{i}")).find(|n| *n != o).unwrap_or_else(|| "n1".into())
        }
        Some(t) => t.to_owned(),
        None => fault::untargeted(f.kind).into(),
    }
}

mod timeline;

#[cfg(test)]
mod tests;
