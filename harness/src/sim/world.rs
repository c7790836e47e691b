//! One seed's world: a current-thread runtime on paused (virtual) time, the model primary, the
//! store, the nodes running the reference node's job, an observer sampling the primary, and the
//! recorder; at the end the store's audit log, the snapshot and the seal, as a container run
//! leaves them. Nothing in it reads the machine's clock or entropy: one seed, one history.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use leasequake_reports::history::{EventKind, HistoryLine, NodeCommand, ObserverSample, Snapshot, PROTOCOL_VERSION};
use leasequake_reports::CheckResult;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::env::{SimEnv, VClock};
use super::gate::{Gate, Gated};
use super::redis::conn::ModelConnection;
use super::redis::{Instance, Reply, Role};
use crate::error::HarnessError;
use crate::job::{Emitter, Variant};
use crate::recorder::Recorder;
use crate::run::{node_config, scenario_header, Links};
use crate::scenario::Scenario;
use crate::store::Store;

/// A simulated run's history and its verdict.
pub struct SimRun {
    /// The history, sealed, as a container run writes it.
    pub lines: Vec<HistoryLine>,
    /// The checker's verdict on it.
    pub result: CheckResult,
}

/// The tenant every simulated run syncs.
const TENANT: &str = "sim";
/// The lease key of that tenant (the lease's key layout).
const LEASE_KEY: &str = "leasequake:{sim}:lease";
/// How often the observer samples the primary.
const OBSERVER_EVERY: Duration = Duration::from_millis(250);
/// How long the nodes get to stop after `stop`.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// Runs scenario `s`'s configuration for `virtual_s` seconds of virtual time with `seed`.
///
/// # Errors
/// The runtime or the store cannot be built.
pub fn run_seed(s: &Scenario, seed: u64, virtual_s: u64) -> Result<SimRun, HarnessError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .map_err(HarnessError::io("building a simulation runtime"))?;
    let store = Store::new(s.store.policy, None).map_err(HarnessError::io("creating the model store"))?;
    let lines = rt.block_on(world(s, seed, virtual_s, store));
    let result = crate::check::check(&lines);
    Ok(SimRun { lines, result })
}

/// A node of the world: its command channel, its job, and the task that records its events.
struct SimNode {
    commands: mpsc::Sender<NodeCommand>,
    job: JoinHandle<()>,
    recorder: JoinHandle<()>,
}

async fn world(s: &Scenario, seed: u64, virtual_s: u64, store: Store) -> Vec<HistoryLine> {
    let clock = VClock::start();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let header = scenario_header(s, seed, &format!("sim-{seed}"), TENANT, clock.now_ns(), 0);
    let rec = Recorder::new(HistoryLine::Header(header));
    let primary = Arc::new(Mutex::new(Instance::new(Role::Primary)));
    let store = Arc::new(store.with_stamp(clock.stamp()));
    let redis = ModelConnection::new(primary.clone(), Arc::new(move || clock.unix_ms()));
    let nodes: Vec<SimNode> = (1..=s.nodes.count)
        .map(|i| {
            let env = SimEnv {
                clock,
                redis: redis.clone(),
                store: store.clone(),
                node_gate: Arc::default(),
                renewal_gate: Arc::default(),
                latency: Duration::from_micros(250),
                nonce: rng.random(),
            };
            start_node(s, seed, i, env, &rec)
        })
        .collect();
    let stop = CancellationToken::new();
    let observer = tokio::spawn(observe(primary, clock, rec.clone(), stop.clone()));
    tokio::time::sleep(Duration::from_secs(virtual_s)).await;
    for n in &nodes {
        let _ = n.commands.send(NodeCommand::Stop).await;
    }
    for n in nodes {
        let _ = tokio::time::timeout(STOP_GRACE, n.job).await;
        let _ = tokio::time::timeout(STOP_GRACE, n.recorder).await;
    }
    stop.cancel();
    let _ = observer.await;
    close(&rec, &store, clock)
}

/// Starts node `i` (incarnation 1): its job behind its gate, its events into the history.
fn start_node(s: &Scenario, seed: u64, i: u32, env: SimEnv, rec: &Recorder) -> SimNode {
    let links = Links { redis_url: "sim://redis-primary".into(), store_addr: "sim://store".into() };
    let config = node_config(s, &[], seed, TENANT, (i, 1), links);
    let (events_tx, mut events) = mpsc::channel(4096);
    let emitter = Emitter::new(events_tx, env.clock.stamp());
    emitter.emit(EventKind::Hello { protocol: PROTOCOL_VERSION, implementation: "leasequake-node (sim)".into() });
    let (commands, commands_rx) = mpsc::channel::<NodeCommand>(16);
    let _ = commands.try_send(NodeCommand::Start);
    let stream =
        futures_util::stream::unfold(commands_rx, |mut rx| async move { rx.recv().await.map(|c| (Ok(c), rx)) });
    let (clock, gate): (VClock, Arc<Gate>) = (env.clock, env.node_gate.clone());
    let job = crate::job::run(Arc::new(env), config, emitter, stream.boxed(), Arc::new(Variant::reference()));
    let job = tokio::spawn(Gated::new(vec![gate], job));
    let (rec, node) = (rec.clone(), format!("n{i}"));
    let recorder = tokio::spawn(async move {
        // Bounded by the job: the channel closes when its emitters are gone.
        while let Some(event) = events.recv().await {
            rec.push(HistoryLine::Node { node: node.clone(), incarnation: 1, received_ns: clock.now_ns(), event });
        }
    });
    SimNode { commands, job, recorder }
}

/// The observer: the primary's holder, ttl and role every [`OBSERVER_EVERY`], until `stop`.
async fn observe(primary: Arc<Mutex<Instance>>, clock: VClock, rec: Recorder, stop: CancellationToken) {
    let mut tick = tokio::time::interval(OBSERVER_EVERY);
    // Bounded by `stop`.
    loop {
        tokio::select! {
            biased;
            () = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        let (holder, ttl) = {
            let mut p = primary.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let now = clock.unix_ms();
            let args = |a: &[&str]| a.iter().map(|x| x.as_bytes().to_vec()).collect::<Vec<_>>();
            (p.exec(&args(&["GET", LEASE_KEY]), now), p.exec(&args(&["PTTL", LEASE_KEY]), now))
        };
        rec.push(HistoryLine::Observer(ObserverSample {
            instance: "redis-primary".into(),
            at_ns: clock.now_ns(),
            holder: match holder {
                Reply::Bulk(b) => Some(String::from_utf8_lossy(&b).into_owned()),
                _ => None,
            },
            ttl_ms: match ttl {
                Reply::Int(n) if n >= 0 => Some(n),
                _ => None,
            },
            role: Some("master".into()),
            error: None,
        }));
    }
}

/// The store's audit log, the snapshot and the seal.
fn close(rec: &Recorder, store: &Store, clock: VClock) -> Vec<HistoryLine> {
    for record in store.audit_after(0) {
        rec.push(HistoryLine::Audit(record));
    }
    let view = store.tenant_view(TENANT);
    let left = view["collections"]
        .as_array()
        .map(|cs| {
            cs.iter().filter(|c| c["live"] == false).filter_map(|c| c["name"].as_str().map(str::to_owned)).collect()
        })
        .unwrap_or_default();
    rec.push(HistoryLine::Snapshot(Snapshot {
        ended_ns: clock.now_ns(),
        faults_still_applied: vec![],
        temporary_collections_left: left,
        extended_ms: None,
        versions: [("harness".to_owned(), env!("CARGO_PKG_VERSION").to_owned())].into(),
        seal: None,
    }));
    let mut lines = rec.take();
    crate::history::seal(&mut lines);
    lines
}
