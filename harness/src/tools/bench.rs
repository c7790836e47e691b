//! `leasequake bench`: the speed figures against their targets, in one run, printed and written as
//! JSON so runs can be compared. Benchmarks, not tests: nothing here asserts a time.
//!
//! Figures: images built from nothing and checked unchanged; environment start to ready; faults
//! through the proxy and by signal, from request to the effect an independent probe sees (p50,
//! p99), against the proxied round trip; Docker-level faults' own figures; the checker on 1 M
//! history lines and the report rendering of that history.

use std::time::{Duration, Instant};

use leasequake_reports::history::{
    AuditRecord, EventKind, FaultEvent, FaultPhase, FenceSource, Header, HistoryLine, NodeEvent, ObserverSample,
    Snapshot, StoreOp, StorePolicy,
};
use serde::Serialize;

use crate::env::{EnvConfig, Environment, PROXY_PORT_BASE};
use crate::error::HarnessError;
use crate::image::{ensure, remove_all, ImageSpec};

/// One measured figure.
#[derive(Debug, Clone, Serialize)]
pub struct Figure {
    /// What was measured.
    pub name: String,
    /// The value.
    pub value: f64,
    /// Its unit (`s`, `ms`, `µs`).
    pub unit: String,
    /// The target, in the same unit, if there is one.
    pub target: Option<f64>,
    /// How it was measured (samples, percentiles, baseline).
    pub note: String,
}

impl Figure {
    fn new(name: &str, value: f64, unit: &str, target: Option<f64>, note: String) -> Self {
        Self { name: name.into(), value, unit: unit.into(), target, note }
    }
    /// `value / target`, where there is a target.
    #[must_use]
    pub fn ratio(&self) -> Option<f64> {
        self.target.map(|t| self.value / t)
    }
}

/// Sorted samples' percentile `p` (0..=100).
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The checker and the report renderer on `lines` synthetic history lines.
#[must_use]
pub fn checker_figures(lines: usize) -> Vec<Figure> {
    let h = synthetic_history(lines);
    let before_last = as_read(&h);
    let t = Instant::now();
    let result = crate::check::check_read(&h, Some(before_last));
    let checked = t.elapsed();
    let run = leasequake_reports::suite::ScenarioRun {
        name: "bench".into(),
        file: "bench".into(),
        description: "synthetic history".into(),
        seed: 1,
        dir: "01-bench".into(),
        took_s: 0.0,
        config: Default::default(),
        expected: None,
        result: Some(result),
        error: None,
        repro: String::new(),
        rerun: String::new(),
        extended_ms: None,
    };
    let suite = leasequake_reports::suite::Suite {
        schema: leasequake_reports::suite::SUMMARY_SCHEMA,
        started_utc: String::new(),
        took_s: 0.0,
        versions: Default::default(),
        verdict: run.verdict(),
        stopped: None,
        scenarios: vec![run],
        coverage: None,
    };
    let t = Instant::now();
    let page = leasequake_reports::html::render(&suite, &[Some(h)]);
    let rendered = t.elapsed();
    let per_1m = 1e6 / lines as f64;
    let build = if cfg!(debug_assertions) { "; DEBUG build: build with --release for the real figure" } else { "" };
    vec![
        Figure::new(
            "checker, 1 M history lines",
            checked.as_secs_f64() * per_1m,
            "s",
            Some(1.0),
            format!("{lines} lines in {:.3} s{build}", checked.as_secs_f64()),
        ),
        Figure::new(
            "report rendering of that history",
            rendered.as_secs_f64() * per_1m,
            "s",
            Some(2.0),
            format!("report.html of {} KB{build}", page.len() / 1024),
        ),
    ]
}

/// Everything: images (removed and rebuilt), environments, faults, checker. Refuses to run while
/// another run's containers exist (it removes and rebuilds the images they use).
pub async fn run(samples: usize) -> Result<Vec<Figure>, HarnessError> {
    let docker = crate::docker::connect().await?;
    let busy = crate::env::labelled_containers(&docker).await?;
    if busy > 0 {
        return Err(HarnessError::Environment {
            detail: format!(
                "{busy} labelled container(s) of another run exist: the bench removes and rebuilds the images \
                 they use. Let them finish, or remove them with `leasequake clean`"
            ),
        });
    }
    let mut out = Vec::new();
    let _ = remove_all(&docker).await;
    let t = Instant::now();
    let redis = ensure(&docker, &ImageSpec::redis()?).await?;
    let proxy = ensure(&docker, &ImageSpec::proxy()?).await?;
    let store = ensure(&docker, &ImageSpec::store()?).await?;
    out.push(Figure::new(
        "images built from nothing",
        t.elapsed().as_secs_f64(),
        "s",
        Some(30.0),
        "redis, proxy, store (cargo build aside)".into(),
    ));
    let t = Instant::now();
    let mut rebuilt = false;
    for spec in [ImageSpec::redis()?, ImageSpec::proxy()?, ImageSpec::store()?] {
        rebuilt |= ensure(&docker, &spec).await?.rebuilt;
    }
    out.push(Figure::new(
        "images unchanged: checked and reused",
        t.elapsed().as_secs_f64(),
        "s",
        None,
        if rebuilt { "REBUILT: an input changed between two builds".into() } else { "no rebuild".into() },
    ));
    let cfg = EnvConfig {
        nodes: 1,
        down_after_ms: 1000,
        failover_timeout_ms: 3000,
        ready_timeout: Duration::from_secs(60),
        origin: "bench",
        store_policy: StorePolicy::Enforce,
        redis_image: redis,
        proxy_image: proxy,
        store_image: store,
    };
    let mut ready = Vec::new();
    for _ in 0..5 {
        let env = Environment::up(docker.clone(), &cfg).await?;
        ready.push(env.ready_in.as_secs_f64());
        env.down().await?;
    }
    ready.sort_by(f64::total_cmp);
    out.push(Figure::new(
        "environment start to ready (median of 5)",
        percentile(&ready, 50.0),
        "s",
        Some(3.0),
        format!("primary, replica, 3 Sentinels, proxy, store; all: {ready:.2?}"),
    ));
    let env = Environment::up(docker.clone(), &cfg).await?;
    let faults = fault_figures(&env, samples).await;
    env.down().await?;
    out.extend(faults?);
    out.extend(checker_figures(1_000_000));
    out.extend(sim_figures(Duration::from_secs(20)));
    Ok(out)
}

/// Faults in one environment, each timed through the runner's own fault code: a partition of a
/// node's proxied Redis link and its heal, SIGSTOP of a process to the pause probe's state T, and
/// the failover's Docker-level stop and network cut of the primary.
async fn fault_figures(env: &Environment, samples: usize) -> Result<Vec<Figure>, HarnessError> {
    let proxy = leasequake_toxiproxy::Client::new(env.proxy_api.clone());
    let listen = format!("0.0.0.0:{PROXY_PORT_BASE}");
    proxy.create_proxy("n1-redis", &listen, "redis-primary:6379").await.map_err(env_err)?;
    let (rtt_figure, rtt_p50) = proxied_round_trip(env, samples).await?;
    let mut out = vec![rtt_figure];
    out.extend(partition_figures(env, &proxy, samples, rtt_p50).await?);
    out.push(sigstop_figure(samples).await?);
    out.extend(primary_figures(env, samples).await?);
    Ok(out)
}

fn env_err(e: impl std::fmt::Display) -> HarnessError {
    HarnessError::Environment { detail: e.to_string() }
}

/// The baseline: a PING's round trip through node 1's proxy to the primary; the figure and its p50.
async fn proxied_round_trip(env: &Environment, samples: usize) -> Result<(Figure, f64), HarnessError> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let auth = format!("AUTH {}\r\nPING\r\n", env.redis_password());
    let mut rtt = Vec::new();
    let mut conn = tokio::net::TcpStream::connect(("127.0.0.1", env.proxy_ports[0])).await.map_err(env_err)?;
    conn.set_nodelay(true).map_err(env_err)?;
    let mut buf = [0u8; 256];
    conn.write_all(auth.as_bytes()).await.map_err(env_err)?;
    let _ = tokio::time::timeout(Duration::from_secs(2), conn.read(&mut buf)).await;
    for _ in 0..samples.max(1) * 4 {
        let t = Instant::now();
        conn.write_all(b"PING\r\n").await.map_err(env_err)?;
        let n = tokio::time::timeout(Duration::from_secs(2), conn.read(&mut buf)).await;
        if matches!(n, Ok(Ok(k)) if k > 0) {
            rtt.push(ms(t.elapsed()));
        }
    }
    rtt.sort_by(f64::total_cmp);
    let p50 = percentile(&rtt, 50.0);
    let figure =
        Figure::new("proxied Redis round trip (p50)", p50 * 1000.0, "µs", None, format!("{} PINGs", rtt.len()));
    Ok((figure, p50))
}

/// A partition (reset) of node 1's Redis link, through the runner's own fault code: the apply
/// returns once its probe saw the link cut; the heal is timed to a PING answered again.
async fn partition_figures(
    env: &Environment,
    proxy: &leasequake_toxiproxy::Client,
    samples: usize,
    rtt_p50: f64,
) -> Result<Vec<Figure>, HarnessError> {
    let scenario = one_partition()?;
    let events = tokio::sync::broadcast::channel(1).0;
    let dir = std::env::temp_dir();
    let lease = crate::holders::Holders::new("bench", scenario.nodes.count);
    let world = crate::fault::World { s: &scenario, env, proxy, dir: &dir, lease: &lease, events: &events };
    let f = &scenario.faults[0];
    let (mut cut, mut heal) = (Vec::new(), Vec::new());
    for id in (1..).take(samples) {
        let t = Instant::now();
        if crate::fault::apply(&world, id, f, 1, None).await.is_ok() {
            cut.push(ms(t.elapsed()));
        }
        let applied = crate::fault::Applied { id, fault: f.clone(), target: "n1".into(), index: 1, node: None };
        let t = Instant::now();
        let healed = crate::fault::heal(&world, &applied, false, &mut NoNodes).await;
        if matches!(healed, crate::fault::Heal::Done(_)) && wait_for(env.proxy_ports[0], true).await {
            heal.push(ms(t.elapsed()));
        }
    }
    let mut out = Vec::new();
    for (what, mut v) in [
        ("partition, the runner's apply: request to verified effect", cut),
        ("partition healed: request to effect", heal),
    ] {
        v.sort_by(f64::total_cmp);
        let note = format!(
            "p50 {:.2} ms of {}; p99 / proxied round trip = {:.0}",
            percentile(&v, 50.0),
            v.len(),
            percentile(&v, 99.0) / rtt_p50
        );
        out.push(Figure::new(&format!("{what} (p99)"), percentile(&v, 99.0), "ms", Some(50.0), note));
    }
    Ok(out)
}

/// SIGSTOP of a local process until the pause fault's own probe sees it stopped (it polls /proc
/// every 10 ms, so this is what a `pause` takes in a run, not the kernel's delivery alone).
async fn sigstop_figure(samples: usize) -> Result<Figure, HarnessError> {
    let mut stop = Vec::new();
    for _ in 0..samples {
        let mut child = tokio::process::Command::new("sleep").arg("30").kill_on_drop(true).spawn().map_err(env_err)?;
        let Some(pid) = child.id() else { continue };
        let pid = rustix::process::Pid::from_raw(pid as i32).ok_or_else(|| env_err("no pid"))?;
        let t = Instant::now();
        rustix::process::kill_process(pid, rustix::process::Signal::STOP).map_err(env_err)?;
        if crate::fault::stopped(pid.as_raw_nonzero().get()).await.is_ok() {
            stop.push(ms(t.elapsed()));
        }
        let _ = child.start_kill();
        let _ = child.wait().await;
    }
    stop.sort_by(f64::total_cmp);
    Ok(Figure::new(
        "pause by signal: SIGSTOP to the pause probe's state T (p99)",
        percentile(&stop, 99.0),
        "ms",
        Some(50.0),
        format!("p50 {:.3} ms of {}", percentile(&stop, 50.0), stop.len()),
    ))
}

/// The failover's ways of losing the primary, through the runner's code: SIGSTOP through the
/// Docker API (to state T, by the pause probe) and the cut from the replication network.
async fn primary_figures(env: &Environment, samples: usize) -> Result<Vec<Figure>, HarnessError> {
    use crate::fault::{cut_primary, rejoin_primary, signal_primary, stopped};
    let primary = env.container("redis-primary").ok_or_else(|| env_err("no primary"))?.to_owned();
    let inspected = env.docker().inspect_container(&primary, None).await.ok();
    let pid = inspected.and_then(|i| i.state).and_then(|s| s.pid).ok_or_else(|| env_err("no primary pid"))? as i32;
    let mut dstop = Vec::new();
    for _ in 0..samples.min(10) {
        let t = Instant::now();
        signal_primary(env, &primary, "SIGSTOP").await.map_err(env_err)?;
        let seen = stopped(pid).await;
        dstop.push(ms(t.elapsed()));
        signal_primary(env, &primary, "SIGCONT").await.map_err(env_err)?;
        seen.map_err(env_err)?;
    }
    dstop.sort_by(f64::total_cmp);
    let mut cuts = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        cut_primary(env, &primary).await.map_err(env_err)?;
        cuts.push(ms(t.elapsed()));
        rejoin_primary(env, &primary).await.map_err(env_err)?;
    }
    cuts.sort_by(f64::total_cmp);
    Ok(vec![
        Figure::new(
            "Docker-level pause: API SIGSTOP to state T (p99)",
            percentile(&dstop, 99.0),
            "ms",
            None,
            format!("p50 {:.1} ms of {}", percentile(&dstop, 50.0), dstop.len()),
        ),
        Figure::new(
            "Docker-level network cut: disconnect call (median of 3)",
            percentile(&cuts, 50.0),
            "ms",
            None,
            format!("all: {cuts:.0?}"),
        ),
    ])
}

/// A scenario of one node whose Redis link is reset: the fault the partition figures time.
fn one_partition() -> Result<crate::scenario::Scenario, HarnessError> {
    let text = "name = \"bench\"\ndescription = \"bench\"\nincident = \"bench\"\nduration_s = 30\n[nodes]\ncount = 1\n\
                [lease]\nttl_ms = 3000\n[store]\npolicy = \"enforce\"\nfence_source = \"store\"\n[[faults]]\n\
                kind = \"partition\"\ntarget = \"n1\"\nlink = \"redis\"\nmode = \"reset\"\nat_s = 1\nduration_s = 1\n";
    crate::scenario::parse(std::path::Path::new("bench.toml"), text)
        .map_err(|e| HarnessError::Environment { detail: format!("the bench scenario: {e}") })
}

/// The partition figures run no node.
struct NoNodes;

impl crate::fault::Nodes for NoNodes {
    fn handle(&self, _: u32) -> Option<crate::supervisor::NodeHandle> {
        None
    }

    fn restart(&mut self, index: u32) -> Result<u64, String> {
        Err(format!("the benchmark runs no node n{index}"))
    }
}

/// Waits (at most 2 s) until a PING through the proxy on `port` is answered (`answered`) or is
/// not (reset, closed, refused).
async fn wait_for(port: u16, answered: bool) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until {
        let got = async {
            let mut c = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.ok()?;
            c.write_all(b"PING\r\n").await.ok()?;
            let mut buf = [0u8; 64];
            match tokio::time::timeout(Duration::from_millis(200), c.read(&mut buf)).await {
                Ok(Ok(n)) if n > 0 => Some(()),
                _ => None,
            }
        }
        .await
        .is_some();
        if got == answered {
            return true;
        }
    }
    false
}

/// The figures as a table: name, value, target, ratio, note.
#[must_use]
pub fn table(figures: &[Figure]) -> String {
    let mut s = String::new();
    for f in figures {
        let target = f.target.map_or("-".into(), |t| format!("<= {t} {}", f.unit));
        let ratio = f.ratio().map_or(String::new(), |r| format!("ratio {r:.2}{}", if r > 1.0 { " OVER" } else { "" }));
        s.push_str(&format!(
            "{:<58} {:>10.3} {:<3} {:<14} {:<12} {}\n",
            f.name, f.value, f.unit, target, ratio, f.note
        ));
    }
    s
}

/// The hash `history::read_hashed` takes of `h`'s lines as it reads them from a file (the seal
/// is checked against it): the checker's figure times judging, as reading a file hashes it.
#[must_use]
pub fn as_read(h: &[HistoryLine]) -> sha2::Sha256 {
    let mut hasher = crate::history::LineHasher::default();
    for l in h {
        hasher.line(&serde_json::to_string(l).unwrap_or_default());
    }
    hasher.before_last()
}

/// A synthetic history of about `n` lines: rounds of node events and audit records from three
/// nodes, with losses, fenced rejections, faults and observer samples (the checker's workload).
#[must_use]
pub fn synthetic_history(n: usize) -> Vec<HistoryLine> {
    let mut h = vec![HistoryLine::Header(synthetic_header())];
    let (mut t, mut seq, mut fence, mut fault) = (0u64, 0u64, 0u64, 0u64);
    while h.len() < n {
        fence += 1;
        let node = format!("n{}", fence % 3 + 1);
        let token = format!("{node}/1/{fence}/x");
        let ev = |h: &mut Vec<HistoryLine>, t: &mut u64, kind| {
            *t += 100_000;
            let event = NodeEvent { mono_ns: *t, round: fence, kind };
            h.push(HistoryLine::Node { node: node.clone(), incarnation: 1, received_ns: *t, event });
        };
        let now = t;
        ev(&mut h, &mut t, EventKind::Acquired { token: token.clone(), fence, sent_ns: Some(now + 50_000) });
        for number in 1..=7u8 {
            let (call, now) = (u64::from(number), t);
            let kind = EventKind::CheckpointPassed { token: token.clone(), number, decided_ns: Some(now + 50_000) };
            ev(&mut h, &mut t, kind);
            let now = t;
            let decided_ns = Some(now + 50_000);
            ev(
                &mut h,
                &mut t,
                EventKind::StoreCallSent { token: token.clone(), fence, op: StoreOp::Upsert, call, decided_ns },
            );
            seq += 1;
            t += 100_000;
            h.push(HistoryLine::Audit(synthetic_write(seq, t, &node, &token, fence, number)));
            ev(&mut h, &mut t, EventKind::StoreCallAcked { token: token.clone(), call });
        }
        if fence % 7 == 0 {
            let kind = EventKind::OwnershipLost { token: token.clone(), reason: "expired".into(), checkpoint: Some(3) };
            ev(&mut h, &mut t, kind);
        }
        t += 100_000;
        h.push(HistoryLine::Observer(ObserverSample {
            instance: "redis-primary".into(),
            at_ns: t,
            holder: Some(token.clone()),
            ttl_ms: Some(900),
            role: Some("master".into()),
            error: None,
            asked_ns: None,
        }));
        if fence % 50 == 0 {
            fault += 1;
            for phase in [FaultPhase::Requested, FaultPhase::Verified, FaultPhase::Healed] {
                t += 100_000;
                h.push(HistoryLine::Fault(FaultEvent {
                    id: fault,
                    fault: leasequake_reports::history::FaultKind::Pause,
                    target: node.clone(),
                    phase,
                    at_ns: t,
                    detail: String::new(),
                    redis_link: None,
                    outlasts_ms: None,
                }));
            }
        }
    }
    h.push(HistoryLine::Snapshot(Snapshot {
        ended_ns: t + 1,
        faults_still_applied: vec![],
        temporary_collections_left: vec![],
        extended_ms: None,
        versions: Default::default(),
        witness_gaps: Vec::new(),
        stopped: None,
        seal: None,
    }));
    crate::history::seal(&mut h);
    h
}

fn synthetic_header() -> Header {
    Header {
        version: leasequake_reports::history::HISTORY_VERSION,
        run_id: "bench".into(),
        scenario: "bench".into(),
        seed: 1,
        tenant: "t".into(),
        policy: StorePolicy::Enforce,
        fence_source: FenceSource::Redis,
        expected: None,
        liveness_bound_ms: 10_000,
        node_silence_ms: 60_000,
        observer_gap_ms: 60_000,
        started_ns: 0,
        audit_after: 0,
        renew_ms: Some(40),
        ttl_ms: Some(120),
        waste_budget_ms: None,
        node_command: None,
        clients_follow: false,
        round_estimate_ms: None,
        model_after: 0,
        witness: false,
    }
}

/// The store's record of write `number` of a round; every tenth round's last one is stale.
fn synthetic_write(seq: u64, t: u64, node: &str, token: &str, fence: u64, number: u8) -> AuditRecord {
    let stale = fence % 10 == 0 && number == 7;
    AuditRecord {
        seq,
        mono_ns: t,
        tenant: "t".into(),
        node: node.to_owned(),
        token: token.to_owned(),
        fence: if stale { fence - 1 } else { fence },
        op: if number == 5 { StoreOp::SwitchAlias } else { StoreOp::Upsert },
        collection: Some(format!("c{fence}")),
        accepted: !stale,
        reason: stale.then(|| "stale fence".into()),
        alias_version: (number == 5).then_some(fence),
        call: u64::from(number),
    }
}

/// The suite's wall time at parallelism 1 and 2 (child runs of this binary), with the verdicts.
pub async fn suite_figures(paths: &[std::path::PathBuf]) -> Result<Vec<Figure>, HarnessError> {
    let files = crate::scenario::discover(paths).len();
    let dir = std::env::temp_dir().join(format!("leasequake-bench-suite-{}", std::process::id()));
    let exe = std::env::current_exe().map_err(HarnessError::io("finding this program to time the suite"))?;
    let mut out = Vec::new();
    for parallel in [1u32, 2] {
        let started = Instant::now();
        let run = tokio::process::Command::new(&exe)
            .arg("run")
            .args(paths)
            .args(["--parallel", &parallel.to_string(), "--report-dir"])
            .arg(dir.join(parallel.to_string()))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .await
            .map_err(HarnessError::io(format!("running the suite at parallelism {parallel}")))?;
        let took = started.elapsed().as_secs_f64() / 60.0;
        let verdict = std::fs::read(dir.join(parallel.to_string()).join("latest/summary.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<leasequake_reports::suite::Suite>(&b).ok())
            .map_or_else(|| "no summary".into(), |s| format!("{:?}", s.verdict).to_uppercase());
        out.push(Figure {
            name: format!("suite of {files} scenario files, parallelism {parallel}"),
            value: took,
            unit: "min".into(),
            target: Some(8.0),
            note: format!("verdict {verdict} (exit {:?}); reports under {}", run.code(), dir.display()),
        });
    }
    Ok(out)
}

/// The simulation's speed: seeds of the recommended configuration (scenarios/sim/recommended.toml:
/// 3 nodes, ttl 1.5 s, 60 virtual s, three random faults), the real lease and node code, each
/// history judged by the real checker in memory, for about `budget` of wall time on every core.
#[must_use]
pub fn sim_figures(budget: Duration) -> Vec<Figure> {
    let Ok(s) = crate::scenario::load(crate::sim::seeds::default_scenario()) else {
        let why = "no scenarios/sim/recommended.toml here: run bench from the checkout's root";
        return vec![Figure::new("simulation: wall time per seed", 0.0, "ms", Some(6.0), why.into())];
    };
    let workers = std::thread::available_parallelism().map_or(1, usize::from);
    let variant = std::sync::Arc::new(crate::job::Variant::reference());
    let started = Instant::now();
    let seeds: Vec<(u64, u64)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers as u64)
            .map(|w| {
                let (s, variant) = (&s, variant.clone());
                scope.spawn(move || {
                    let _quiet = tracing::subscriber::set_default(tracing::subscriber::NoSubscriber::default());
                    let (mut done, mut failed) = (0u64, 0u64);
                    let mut seed = w;
                    while started.elapsed() < budget {
                        let ok = crate::sim::run_seed(s, seed, 60, &variant)
                            .is_ok_and(|r| r.result.verdict == leasequake_reports::Verdict::Pass);
                        done += 1;
                        failed += u64::from(!ok);
                        seed += workers as u64;
                    }
                    (done, failed)
                })
            })
            .collect();
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    });
    let took = started.elapsed().as_secs_f64();
    let (done, failed) = seeds.iter().fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    let per_min = done as f64 * 60.0 / took;
    let build = if cfg!(debug_assertions) { "; DEBUG build: build with --release for the real figure" } else { "" };
    // The target, 10 000 seeds a minute on the machine's cores, is 6 ms of wall time per seed.
    vec![Figure::new(
        "simulation: wall time per seed (60 virtual s, 3 nodes, judged)",
        took * 1000.0 / done.max(1) as f64,
        "ms",
        Some(6.0),
        format!("{per_min:.0} seeds/min: {done} seeds on {workers} cores in {took:.1} s, virtual/wall {per_min:.0}x, {failed} not PASS{build}"),
    )]
}
