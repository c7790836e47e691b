//! The runner: one scenario, one fresh environment. Brings the environment up, gives each node a
//! Redis proxy and a store proxy, starts the nodes, samples the lease key on every Redis instance,
//! applies the fault schedule (each fault verified by an independent probe and healed), then
//! records the history, runs the checker, and takes everything down.
//!
//! This version runs partition, pause, stall-renewal, crash, slow-store and failing-store faults;
//! slow-model makes the run inconclusive ("not supported yet"), never a pass.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use leasequake_reports::history::{
    EventKind, FaultEvent, FaultPhase, Header, HistoryLine, LeaseTimings, NodeCommand, NodeConfig, ObserverSample,
    PipelineShape, Snapshot, HISTORY_VERSION, PROTOCOL_VERSION,
};
use leasequake_reports::CheckResult;
use leasequake_toxiproxy::{Client as ProxyClient, Stream, ToxicSpec};
use rustix::process::Signal;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::check::check;
use crate::clock::mono_ns;
use crate::env::{EnvConfig, Environment, PROXY_PORT_BASE};
use crate::error::HarnessError;
use crate::history::{write, write_atomically, HISTORY_FILE, VERDICTS_FILE};
use crate::image::{ensure, resolve, ImageSpec};
use crate::scenario::{FaultKind, Link, Mode, Scenario};
use crate::supervisor::{NodeProcess, Received};

/// What a finished run left.
#[derive(Debug)]
pub struct RunOutcome {
    /// The run directory (history.jsonl, verdicts.json, node logs).
    pub dir: PathBuf,
    /// The checker's result.
    pub result: CheckResult,
    /// The seed used.
    pub seed: u64,
}

type Lines = Arc<Mutex<Vec<HistoryLine>>>;

fn push(lines: &Lines, line: HistoryLine) {
    lines.lock().unwrap_or_else(PoisonError::into_inner).push(line);
}

/// Runs `scenario` and writes its run directory under `report_dir`.
pub async fn run(
    s: &Scenario,
    seed: Option<u64>,
    report_dir: &Path,
    cancel: CancellationToken,
) -> Result<RunOutcome, HarnessError> {
    let seed = seed.or(s.seed).unwrap_or_else(rand::random);
    let dir = report_dir.join(format!("{}-{}", s.name, mono_ns()));
    std::fs::create_dir_all(&dir).map_err(|e| HarnessError::History { path: dir.clone(), detail: e.to_string() })?;
    let docker = crate::docker::connect().await?;
    let cfg = EnvConfig {
        nodes: s.nodes.count,
        down_after_ms: s.sentinel.down_after_ms,
        failover_timeout_ms: s.sentinel.failover_timeout_ms,
        ready_timeout: Duration::from_secs(30),
        origin: "run",
        store_policy: s.store.policy,
        redis_image: resolve(&docker, "LEASEQUAKE_REDIS_IMAGE", ImageSpec::redis).await?,
        proxy_image: resolve(&docker, "LEASEQUAKE_PROXY_IMAGE", ImageSpec::proxy).await?,
        store_image: ensure(&docker, &ImageSpec::store()?).await?,
    };
    let env = Environment::up(docker, &cfg).await?;
    let result = drive(s, seed, &env, &dir, cancel).await;
    env.down().await?;
    let result = result?;
    Ok(RunOutcome { dir, result, seed })
}

fn node_config(s: &Scenario, env: &Environment, i: u32, incarnation: u64, seed: u64) -> NodeConfig {
    let redis_port = env.proxy_ports[(2 * (i - 1)) as usize];
    let store_port = env.proxy_ports[(2 * (i - 1) + 1) as usize];
    NodeConfig {
        protocol: PROTOCOL_VERSION,
        node: format!("n{i}"),
        incarnation,
        tenant: "tenant-a".into(),
        redis_url: format!("redis://:{}@127.0.0.1:{redis_port}/", env.redis_password()),
        store_addr: format!("127.0.0.1:{store_port}"),
        lease: LeaseTimings {
            ttl_ms: s.lease.ttl_ms,
            renew_ms: s.renew_ms(),
            acquire_wait_ms: s.acquire_wait_ms(),
            command_timeout_ms: (s.lease.ttl_ms / 15).clamp(50, 2000),
        },
        pipeline: PipelineShape {
            batches: s.pipeline.batches,
            batch_size: s.pipeline.batch_size,
            embed_ms: s.pipeline.embed_ms,
            prepare_ms: s.pipeline.prepare_ms,
            checkpoints: s.pipeline.checkpoints.clone(),
            sync_points: vec![],
            pause_ms: s.pipeline.pause_ms,
            store_timeout_ms: (s.lease.ttl_ms * 2).max(2000),
        },
        fence_source: s.store.fence_source,
        seed: seed ^ u64::from(i).wrapping_mul(0x9e37_79b9_7f4a_7c15),
    }
}

fn node_command(s: &Scenario) -> Result<Vec<String>, HarnessError> {
    match &s.nodes.command {
        Some(c) => Ok(c.clone()),
        None => Ok(vec![
            std::env::current_exe()
                .map_err(|e| HarnessError::NodeProtocol { detail: e.to_string() })?
                .display()
                .to_string(),
            "node".into(),
        ]),
    }
}

async fn drive(
    s: &Scenario,
    seed: u64,
    env: &Environment,
    dir: &Path,
    cancel: CancellationToken,
) -> Result<CheckResult, HarnessError> {
    let proxy = ProxyClient::new(env.proxy_api.clone());
    let proxy_err =
        |e: leasequake_toxiproxy::ClientError| HarnessError::DockerUnavailable { detail: format!("fault proxy: {e}") };
    for i in 1..=s.nodes.count {
        let base = PROXY_PORT_BASE + 2 * (i as u16 - 1);
        proxy
            .create_proxy(&format!("n{i}-redis"), &format!("0.0.0.0:{base}"), "redis-primary:6379")
            .await
            .map_err(proxy_err)?;
        proxy
            .create_proxy(&format!("n{i}-store"), &format!("0.0.0.0:{}", base + 1), "store:7700")
            .await
            .map_err(proxy_err)?;
    }
    let started_ns = mono_ns();
    let lines: Lines = Arc::new(Mutex::new(vec![HistoryLine::Header(Header {
        version: HISTORY_VERSION,
        run_id: env.run_id.clone(),
        scenario: s.name.clone(),
        seed,
        tenant: "tenant-a".into(),
        policy: s.store.policy,
        fence_source: s.store.fence_source,
        expected: s.expected_failure(),
        liveness_bound_ms: s.liveness_bound_ms(),
        node_silence_ms: s.lease.ttl_ms * 4 + 5000,
        observer_gap_ms: 5000,
        started_ns,
    })]));

    // Nodes and the event collector (which also tracks the current owner for role targets).
    let (tx, mut rx) = mpsc::channel::<Received>(65_536);
    let command = node_command(s)?;
    let stderr = |i: u32| -> Stdio {
        std::fs::File::create(dir.join(format!("n{i}.stderr.log"))).map_or(Stdio::null(), Stdio::from)
    };
    let mut nodes: BTreeMap<u32, (NodeProcess, u64)> = BTreeMap::new();
    for i in 1..=s.nodes.count {
        let n = NodeProcess::spawn(&command, node_config(s, env, i, 1, seed), tx.clone(), stderr(i))?;
        n.send(NodeCommand::Start)?;
        nodes.insert(i, (n, 1));
    }
    let owner: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
    let collector = {
        let (lines, owner) = (lines.clone(), owner.clone());
        tokio::spawn(async move {
            while let Some(r) = rx.recv().await {
                let line = match r.line {
                    Ok(event) => {
                        if let EventKind::Acquired { .. } = &event.kind {
                            *owner.lock().unwrap_or_else(PoisonError::into_inner) = Some(r.node.clone());
                        }
                        HistoryLine::Node { node: r.node, incarnation: 0, received_ns: r.received_ns, event }
                    }
                    Err(g) => HistoryLine::Garbage { node: r.node, received_ns: r.received_ns, raw: g.raw, why: g.why },
                };
                push(&lines, line);
            }
        })
    };

    // The observer: who holds the key on each instance, every 250 ms, through docker exec.
    let stop_observer = cancel.child_token();
    let observer = {
        let (lines, stop) = (lines.clone(), stop_observer.clone());
        let key = "leasequake:{tenant-a}:lease";
        async move {
            // Bounded by the run (stop).
            while !stop.is_cancelled() {
                for instance in ["redis-primary", "redis-replica"] {
                    let at_ns = mono_ns();
                    let sample = match (
                        env.redis_cli(instance, &["GET", key]).await,
                        env.redis_cli(instance, &["PTTL", key]).await,
                        env.redis_cli(instance, &["ROLE"]).await,
                    ) {
                        (Ok(h), Ok(t), Ok(r)) => ObserverSample {
                            instance: instance.into(),
                            at_ns,
                            holder: Some(h.trim().to_owned()).filter(|h| !h.is_empty()),
                            ttl_ms: t.trim().parse().ok(),
                            role: r.lines().next().map(str::to_owned),
                            error: None,
                        },
                        (a, b, c) => ObserverSample {
                            instance: instance.into(),
                            at_ns,
                            holder: None,
                            ttl_ms: None,
                            role: None,
                            error: [a.err(), b.err(), c.err()].into_iter().flatten().next().map(|e| e.to_string()),
                        },
                    };
                    push(&lines, HistoryLine::Observer(sample));
                }
                tokio::select! {
                    () = stop.cancelled() => {}
                    () = tokio::time::sleep(Duration::from_millis(250)) => {}
                }
            }
        }
    };

    // The schedule.
    let schedule = async {
        let t0 = Instant::now();
        let mut applied = Vec::new();
        for (id, f) in s.faults.iter().enumerate() {
            let id = id as u64 + 1;
            let at = t0 + Duration::from_secs(f.at_s);
            tokio::select! { () = cancel.cancelled() => break, () = tokio::time::sleep_until(at.into()) => {} }
            let target = match f.target.as_deref() {
                Some("owner") => {
                    owner.lock().unwrap_or_else(PoisonError::into_inner).clone().unwrap_or_else(|| "n1".into())
                }
                Some("non-owner") => {
                    let o = owner.lock().unwrap_or_else(PoisonError::into_inner).clone().unwrap_or_default();
                    (1..=s.nodes.count).map(|i| format!("n{i}")).find(|n| *n != o).unwrap_or_else(|| "n1".into())
                }
                Some(t) => t.to_owned(),
                None => "store".into(),
            };
            let kind = format!("{:?}", f.kind).to_lowercase();
            let event = |phase, detail: String| {
                HistoryLine::Fault(FaultEvent {
                    id,
                    fault: kind.clone(),
                    target: target.clone(),
                    phase,
                    at_ns: mono_ns(),
                    detail,
                })
            };
            push(&lines, event(FaultPhase::Requested, String::new()));
            let index: u32 = target.trim_start_matches('n').parse().unwrap_or(1);
            let outcome = apply(&proxy, env, f, index, s.nodes.count, nodes.get(&index).map(|n| &n.0)).await;
            match outcome {
                Ok(detail) => push(&lines, event(FaultPhase::Verified, detail)),
                Err(why) => {
                    push(&lines, event(FaultPhase::Failed, why));
                    continue;
                }
            }
            applied.push((id, f.clone(), target.clone(), index, t0 + Duration::from_secs(f.at_s + f.duration_s)));
            // Heal in order (a simple schedule: faults are healed before the next one is due, or
            // at their own time when the next one comes later).
            let (hid, hf, htarget, hindex, when) = applied.remove(0);
            tokio::select! { () = cancel.cancelled() => {}, () = tokio::time::sleep_until(when.into()) => {} }
            let healed = heal(&proxy, hf.kind, hindex, &mut nodes, s, env, seed, &tx, stderr(hindex)).await;
            push(
                &lines,
                HistoryLine::Fault(FaultEvent {
                    id: hid,
                    fault: format!("{:?}", hf.kind).to_lowercase(),
                    target: htarget,
                    phase: FaultPhase::Healed,
                    at_ns: mono_ns(),
                    detail: healed,
                }),
            );
        }
        let end = t0 + Duration::from_secs(s.duration_s);
        tokio::select! { () = cancel.cancelled() => {}, () = tokio::time::sleep_until(end.into()) => {} }
        nodes
    };
    let schedule = async {
        let nodes = schedule.await;
        stop_observer.cancel();
        nodes
    };
    let (nodes, ()) = tokio::join!(schedule, observer);
    for (_, (n, _)) in nodes {
        n.stop(Duration::from_secs(5)).await;
    }
    drop(tx);
    let _ = tokio::time::timeout(Duration::from_secs(5), collector).await;
    stop_observer.cancel();

    // The store's audit log and what was left.
    let (status, audit) = leasequake_toxiproxy::http::exchange(&env.store_addr, "GET", "/v1/audit", None)
        .await
        .map_err(|e| HarnessError::DockerUnavailable { detail: format!("cannot read the store's audit log: {e}") })?;
    if status == 200 {
        for l in audit.lines().filter(|l| !l.trim().is_empty()) {
            if let Ok(r) = serde_json::from_str(l) {
                push(&lines, HistoryLine::Audit(r));
            }
        }
    }
    let view = leasequake_toxiproxy::http::exchange(&env.store_addr, "GET", "/v1/tenants/tenant-a", None).await.ok();
    let left: Vec<String> = view
        .and_then(|(_, b)| serde_json::from_str::<serde_json::Value>(&b).ok())
        .and_then(|v| v["collections"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter(|c| c["live"] == false)
        .filter_map(|c| c["name"].as_str().map(str::to_owned))
        .collect();
    push(
        &lines,
        HistoryLine::Snapshot(Snapshot {
            ended_ns: mono_ns(),
            faults_still_applied: vec![],
            temporary_collections_left: left,
            versions: BTreeMap::from([("harness".to_owned(), env!("CARGO_PKG_VERSION").to_owned())]),
        }),
    );
    let lines = std::mem::take(&mut *lines.lock().unwrap_or_else(PoisonError::into_inner));
    write(&dir.join(HISTORY_FILE), &lines)?;
    let result = check(&lines);
    let json = serde_json::to_vec_pretty(&result)
        .map_err(|e| HarnessError::History { path: dir.to_path_buf(), detail: e.to_string() })?;
    write_atomically(&dir.join(VERDICTS_FILE), &json)?;
    Ok(result)
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

/// Applies one fault and verifies it with an independent probe; the detail says what was seen.
async fn apply(
    proxy: &ProxyClient,
    env: &Environment,
    f: &crate::scenario::Fault,
    index: u32,
    count: u32,
    node: Option<&NodeProcess>,
) -> Result<String, String> {
    match f.kind {
        FaultKind::Partition => {
            let blackhole = f.mode == Some(Mode::Blackhole);
            let mut seen = Vec::new();
            for (name, slot) in proxies_of(index, f.link) {
                let toxic = if blackhole {
                    ToxicSpec::timeout(Stream::Upstream, 0)
                } else {
                    ToxicSpec::reset_peer(Stream::Downstream, 0)
                };
                proxy.add_toxic(&name, &toxic.named("partition")).await.map_err(|e| e.to_string())?;
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
            n.send(NodeCommand::StallRenewal { ms: f.duration_s * 1000 }).map_err(|e| e.to_string())?;
            Ok("stall_renewal command delivered to the node's stdin".into())
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
        FaultKind::SlowStore | FaultKind::FailingStore => {
            // Every node's store proxy: the store itself is slow or failing, for everyone.
            let slow = f.kind == FaultKind::SlowStore;
            let latency = f.latency_ms.unwrap_or(0);
            for i in 1..=count {
                let toxic = if slow {
                    ToxicSpec::latency(Stream::Downstream, latency, 0)
                } else {
                    ToxicSpec::reset_peer(Stream::Downstream, 0)
                };
                proxy
                    .add_toxic(&format!("n{i}-store"), &toxic.named("store-fault"))
                    .await
                    .map_err(|e| e.to_string())?;
            }
            let port = env.proxy_ports[1];
            if slow {
                let t = Instant::now();
                let answer =
                    leasequake_toxiproxy::http::exchange(&format!("127.0.0.1:{port}"), "GET", "/v1/health", None).await;
                let took = t.elapsed().as_millis() as u64;
                match answer {
                    Ok((200, _)) if took >= latency => {
                        Ok(format!("store health answered in {took} ms through n1-store (>= {latency} ms)"))
                    }
                    other => Err(format!(
                        "the probe through n1-store answered {other:?} in {took} ms, expected >= {latency} ms"
                    )),
                }
            } else {
                match probe(port).await {
                    got @ ("reset" | "closed" | "refused") => Ok(format!("n1-store: probe {got}")),
                    got => Err(format!("n1-store: the probe got `{got}` through a failing store")),
                }
            }
        }
        other => Err(format!("{other:?} is not supported by this runner yet")),
    }
}

/// Undoes one fault; returns what was done.
#[allow(clippy::too_many_arguments)]
async fn heal(
    proxy: &ProxyClient,
    kind: FaultKind,
    index: u32,
    nodes: &mut BTreeMap<u32, (NodeProcess, u64)>,
    s: &Scenario,
    env: &Environment,
    seed: u64,
    tx: &mpsc::Sender<Received>,
    stderr: Stdio,
) -> String {
    match kind {
        FaultKind::Partition => {
            for (name, _) in proxies_of(index, None) {
                let _ = proxy.remove_toxic(&name, "partition").await;
            }
            "toxics removed".into()
        }
        FaultKind::Pause => match nodes.get(&index) {
            Some((n, _)) => n.signal(Signal::CONT).map_or_else(|e| e.to_string(), |()| "SIGCONT".into()),
            None => "no such node".into(),
        },
        FaultKind::StallRenewal => "the stall ends by itself".into(),
        FaultKind::SlowStore | FaultKind::FailingStore => {
            for i in 1..=s.nodes.count {
                let _ = proxy.remove_toxic(&format!("n{i}-store"), "store-fault").await;
            }
            "toxics removed".into()
        }
        FaultKind::Crash => {
            let incarnation = nodes.get(&index).map_or(1, |n| n.1) + 1;
            let Ok(command) = node_command(s) else { return "cannot restart: no node command".into() };
            match NodeProcess::spawn(&command, node_config(s, env, index, incarnation, seed), tx.clone(), stderr) {
                Ok(n) => {
                    let _ = n.send(NodeCommand::Start);
                    nodes.insert(index, (n, incarnation));
                    format!("restarted as incarnation {incarnation}")
                }
                Err(e) => format!("restart failed: {e}"),
            }
        }
        _ => "nothing to undo".into(),
    }
}
