//! One seed's world: a current-thread runtime on paused (virtual) time, the model primary, the
//! store (the real store's rules), the nodes running the reference node's job, an observer
//! sampling the primary, the fault schedule drawn from the seed, and the recorder; at the end the
//! store's audit log, the snapshot and the seal, as a container run leaves them. Nothing in it
//! reads the machine's clock or entropy: one seed, one history.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::StreamExt;
use leasequake_reports::history::{
    EnvChange, EnvEvent, EventKind, FaultEvent, FaultPhase, HistoryLine, NodeCommand, ObserverSample, Snapshot,
    PROTOCOL_VERSION,
};
use leasequake_reports::CheckResult;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::cluster::{Cluster, Server};
use super::env::{SimEnv, VClock};
use super::gate::{Gate, Gated, Tasks};
use super::net::Link;
use super::redis::{Reply, Role};
use super::trigger::Seen;
use crate::error::HarnessError;
use crate::job::{Emitter, Variant};
use crate::recorder::Recorder;
use crate::run::{node_config, scenario_header, Links};
use crate::scenario::{Fault, Scenario};
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
pub(super) const LEASE_KEY: &str = "leasequake:{sim}:lease";
/// How often the observer samples the primary.
const OBSERVER_EVERY: Duration = Duration::from_millis(250);
/// How long the nodes get to stop after `stop`.
const STOP_GRACE: Duration = Duration::from_secs(10);
/// Each way, on every link, before faults.
const LATENCY: Duration = Duration::from_micros(250);
/// How long a write takes to reach the replica.
const REPLICATION_LAG: Duration = Duration::from_millis(2);

/// Runs scenario `s`'s configuration for `virtual_s` seconds of virtual time with `seed` and the
/// seed's fault schedule ([`schedule`]).
///
/// # Errors
/// The runtime or the store cannot be built.
pub fn run_seed(s: &Scenario, seed: u64, virtual_s: u64, variant: &Arc<Variant>) -> Result<SimRun, HarnessError> {
    run_schedule(s, seed, virtual_s, schedule(s, seed, virtual_s), variant)
}

/// Runs scenario `s`'s configuration with `seed` (the world's own randomness: tokens, the lease's
/// jitter) and `faults` (a shrinking step's schedule, say), and judges the history.
///
/// # Errors
/// The runtime or the store cannot be built.
pub fn run_schedule(
    s: &Scenario,
    seed: u64,
    virtual_s: u64,
    faults: Vec<Fault>,
    variant: &Arc<Variant>,
) -> Result<SimRun, HarnessError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .map_err(HarnessError::io("building a simulation runtime"))?;
    let store = Store::new(s.store.policy, None).map_err(HarnessError::io("creating the model store"))?;
    let lines = rt.block_on(run_world(s, (seed, virtual_s), store, faults, variant.clone()));
    let result = crate::check::check_sealed_here(&lines);
    Ok(SimRun { lines, result })
}

/// How long a world runs: `virtual_s`, or longer (by at most a minute, as a container run) when
/// a fault's effect outlasts its heal (`fault::outlasts_heal_ms`) past the liveness bound before
/// the end, so that liveness can still be judged after it.
fn run_for(s: &Scenario, faults: &[Fault], virtual_s: u64) -> Duration {
    let planned = virtual_s.saturating_mul(1000);
    let needed = faults
        .iter()
        .filter_map(|f| {
            // A triggered fault may fire up to a liveness bound after it was armed.
            let waits = if f.on.is_some() { s.liveness_bound_ms() } else { 0 };
            let outlasts = crate::fault::outlasts_heal_ms(f).or(f.on.is_some().then_some(0))?;
            let healed = f.at_ms().saturating_add(waits).saturating_add(f.duration_ms());
            Some(healed.saturating_add(outlasts).saturating_add(s.liveness_bound_ms()).saturating_add(500))
        })
        .max()
        .unwrap_or(0);
    Duration::from_millis(needed.clamp(planned, planned.saturating_add(60_000)))
}

/// The seed's fault schedule: the scenario's own `[[faults]]` (an exported schedule) plus its
/// `[random]` draw (the container lane's), or, with neither, the simulation's own draw over every
/// kind the world applies (`schedule::draw`).
pub fn schedule(s: &Scenario, seed: u64, virtual_s: u64) -> Vec<Fault> {
    if s.random.is_none() && s.faults.is_empty() {
        return super::schedule::draw(s, seed, virtual_s);
    }
    s.schedule(seed)
}

/// A node incarnation of the world, as faults reach it.
#[derive(Clone)]
pub(super) struct NodeSlot {
    pub incarnation: u64,
    pub node_gate: Arc<Gate>,
    pub renewal_gate: Arc<Gate>,
    pub redis_link: Arc<Link>,
    pub store_link: Arc<Link>,
    tasks: Arc<Tasks>,
    commands: mpsc::Sender<NodeCommand>,
}

impl NodeSlot {
    /// Sends the node a protocol command.
    pub fn command(&self, c: NodeCommand) -> Result<(), String> {
        self.commands.try_send(c).map_err(|e| e.to_string())
    }
}

/// The world of one seed.
pub(super) struct World {
    s: Scenario,
    pub(super) faults: Vec<Fault>,
    seed: u64,
    pub(super) clock: VClock,
    /// Redis: the primary, its replica, the routing and the replication stream.
    pub redis: Arc<Cluster>,
    store: Arc<Store>,
    rec: Recorder,
    nodes: Mutex<Vec<NodeSlot>>,
    /// Every incarnation's job and the task recording its events, awaited at the end.
    running: Mutex<Vec<(JoinHandle<()>, JoinHandle<()>)>>,
    rng: Mutex<ChaCha8Rng>,
    /// The node variant every incarnation runs (the reference node, or a flawed lease).
    variant: Arc<Variant>,
    /// Every incarnation's node gate, to report a task the simulation held for spinning.
    gates: Mutex<Vec<(String, Arc<Gate>)>>,
    /// Triggered faults armed and not yet fired (`sim::trigger`).
    pub(super) armed: Mutex<Vec<crate::trigger::Armed>>,
    /// The heals of triggered faults still to come, aborted at the end as the driver is.
    pub(super) heals: Mutex<Vec<tokio::task::AbortHandle>>,
    /// Where the nodes' events go for the router, when a fault waits for one.
    seen: Option<mpsc::Sender<Seen>>,
    /// What every node sent on its links and got back.
    witness: Arc<super::witness::Witness>,
}

async fn run_world(
    s: &Scenario,
    (seed, virtual_s): (u64, u64),
    store: Store,
    faults: Vec<Fault>,
    variant: Arc<Variant>,
) -> Vec<HistoryLine> {
    let clock = VClock::start();
    let mut header = scenario_header(s, seed, &format!("sim-{seed}"), TENANT, clock.now_ns(), 0);
    // The simulated nodes reach whichever server is master: Sentinel-aware clients.
    header.clients_follow = true;
    header.witness = true;
    let (seen, seen_rx) = match faults.iter().any(|f| f.on.is_some()) {
        true => {
            let (tx, rx) = mpsc::channel(super::trigger::SEEN_MAX);
            (Some(tx), Some(rx))
        }
        false => (None, None),
    };
    let w = Arc::new(World {
        s: s.clone(),
        faults,
        seed,
        clock,
        redis: Cluster::new(REPLICATION_LAG, clock),
        store: Arc::new(store.with_stamp(clock.stamp())),
        rec: Recorder::new(HistoryLine::Header(header)),
        nodes: Mutex::default(),
        running: Mutex::default(),
        rng: Mutex::new(ChaCha8Rng::seed_from_u64(seed ^ 0x5151_5151)),
        variant,
        gates: Mutex::default(),
        armed: Mutex::default(),
        heals: Mutex::default(),
        seen,
        witness: Arc::new(super::witness::Witness::new(clock)),
    });
    let router = seen_rx.map(|rx| tokio::spawn(super::trigger::route(w.clone(), rx)));
    for i in 1..=s.nodes.count {
        let links = (Arc::new(Link::default()), Arc::new(Link::default()));
        let slot = w.start_node(i, 1, links);
        w.slots().push(slot);
    }
    let stop = CancellationToken::new();
    let observer = tokio::spawn(observe(w.clone(), stop.clone()));
    let driver = tokio::spawn(drive(w.clone()));
    tokio::time::sleep(run_for(s, &w.faults, virtual_s)).await;
    driver.abort();
    if let Some(r) = router {
        r.abort();
    }
    w.heals.lock().unwrap_or_else(PoisonError::into_inner).iter().for_each(tokio::task::AbortHandle::abort);
    for n in w.nodes() {
        let _ = n.commands.send(NodeCommand::Stop).await;
    }
    let running = std::mem::take(&mut *w.running.lock().unwrap_or_else(PoisonError::into_inner));
    for (job, recorder) in running {
        let _ = tokio::time::timeout(STOP_GRACE, job).await;
        let _ = tokio::time::timeout(STOP_GRACE, recorder).await;
    }
    stop.cancel();
    let _ = observer.await;
    w.close()
}

impl World {
    fn slots(&self) -> std::sync::MutexGuard<'_, Vec<NodeSlot>> {
        self.nodes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Node `index`'s current incarnation.
    pub fn node(&self, index: u32) -> Option<NodeSlot> {
        self.slots().get(usize::try_from(index).ok()?.checked_sub(1)?).cloned()
    }

    /// Every node's current incarnation.
    pub fn nodes(&self) -> Vec<NodeSlot> {
        self.slots().clone()
    }

    /// The lease key of the world's tenant.
    pub fn lease_key(&self) -> String {
        LEASE_KEY.to_owned()
    }

    /// The server clients reach (the primary, or the promoted replica after a failover).
    pub fn primary(&self) -> Arc<Server> {
        self.redis.routed()
    }

    /// Runs a command on the primary now, on its clock (the world's own: faults).
    pub fn primary_exec(&self, args: &[&str]) -> Reply {
        let args: Vec<Vec<u8>> = args.iter().map(|a| a.as_bytes().to_vec()).collect();
        self.redis.exec(&self.redis.routed(), &args)
    }

    /// A restart of the primary without persistence; connections refused until `up`.
    pub fn restart_primary(&self, up: Instant) {
        let p = self.primary();
        p.instance.lock().unwrap_or_else(PoisonError::into_inner).restart();
        *p.down_until.lock().unwrap_or_else(PoisonError::into_inner) = Some(up);
    }

    /// Sentinel's `down-after-milliseconds` in this scenario.
    pub fn down_after_ms(&self) -> u64 {
        self.s.sentinel.down_after_ms
    }

    /// Kills node `index`: its job and every task of its incarnation end at once.
    pub fn crash(&self, index: u32) -> Result<(), String> {
        let n = self.node(index).ok_or_else(|| format!("no node n{index}"))?;
        n.tasks.abort_all();
        Ok(())
    }

    /// Starts node `index` again as its next incarnation; returns the incarnation.
    pub fn restart(&self, index: u32) -> Result<u64, String> {
        let n = self.node(index).ok_or_else(|| format!("no node n{index}"))?;
        let slot = self.start_node(index, n.incarnation + 1, (n.redis_link.clone(), n.store_link.clone()));
        let incarnation = slot.incarnation;
        if let Some(s) = self.slots().get_mut(index as usize - 1) {
            *s = slot;
        }
        Ok(incarnation)
    }

    /// Starts incarnation `incarnation` of node `i` on `links`: its job behind its gate, its
    /// events into the history.
    fn start_node(&self, i: u32, incarnation: u64, links: (Arc<Link>, Arc<Link>)) -> NodeSlot {
        let nonce = self.rng.lock().unwrap_or_else(PoisonError::into_inner).random();
        let env = SimEnv {
            clock: self.clock,
            redis: self.redis.clone(),
            store: self.store.clone(),
            redis_link: links.0.clone(),
            store_link: links.1.clone(),
            node_gate: Arc::default(),
            renewal_gate: Arc::default(),
            tasks: Arc::default(),
            latency: LATENCY,
            nonce,
            witness: self.witness.clone(),
            node: format!("n{i}"),
        };
        let endpoints = Links {
            redis_url: "sim://redis-primary".into(),
            store_addr: "sim://store".into(),
            model_addr: Some("sim://model".into()),
        };
        let config = node_config(&self.s, &self.faults, self.seed, TENANT, (i, incarnation), endpoints);
        let (events_tx, mut events) = mpsc::channel(4096);
        let emitter = Emitter::new(events_tx, self.clock.stamp());
        let implementation = match &self.variant.label {
            Some(label) => format!("leasequake-node (sim, {label})"),
            None => "leasequake-node (sim)".into(),
        };
        emitter.emit(EventKind::Hello { protocol: PROTOCOL_VERSION, implementation, lease_key: None, renewals: None });
        let (commands, commands_rx) = mpsc::channel::<NodeCommand>(16);
        let _ = commands.try_send(NodeCommand::Start);
        let stream =
            futures_util::stream::unfold(commands_rx, |mut rx| async move { rx.recv().await.map(|c| (Ok(c), rx)) });
        let slot = NodeSlot {
            incarnation,
            node_gate: env.node_gate.clone(),
            renewal_gate: env.renewal_gate.clone(),
            redis_link: links.0,
            store_link: links.1,
            tasks: env.tasks.clone(),
            commands,
        };
        self.gates.lock().unwrap_or_else(PoisonError::into_inner).push((format!("n{i}"), slot.node_gate.clone()));
        let job = crate::job::run(Arc::new(env), config, emitter, stream.boxed(), self.variant.clone());
        let job = tokio::spawn(Gated::new(vec![slot.node_gate.clone()], job));
        slot.tasks.track(job.abort_handle());
        let (rec, node, clock, seen) = (self.rec.clone(), format!("n{i}"), self.clock, self.seen.clone());
        let recorder = tokio::spawn(async move {
            // Bounded by the job: the channel closes when its emitters are gone.
            while let Some(event) = events.recv().await {
                let kind = seen.is_some().then(|| event.kind.clone());
                rec.push(HistoryLine::Node { node: node.clone(), incarnation, received_ns: clock.now_ns(), event });
                if let (Some(tx), Some(kind)) = (&seen, kind) {
                    let _ = tx.send((i, kind)).await;
                }
            }
        });
        self.running.lock().unwrap_or_else(PoisonError::into_inner).push((job, recorder));
        slot
    }

    /// The node a fault targets now: a named one, or the lease's holder on the primary.
    fn target(&self, f: &Fault) -> u32 {
        let named = |t: &str| t.strip_prefix('n').and_then(|n| n.parse().ok());
        match f.target.as_deref() {
            Some("owner") | None => match self.primary_exec(&["GET", LEASE_KEY]) {
                Reply::Bulk(holder) => named(String::from_utf8_lossy(&holder).split('/').next().unwrap_or("")),
                _ => None,
            }
            .unwrap_or(1),
            Some(t) => named(t).unwrap_or(1),
        }
    }

    /// The scenario's liveness bound, ms.
    pub fn liveness_bound_ms(&self) -> u64 {
        self.s.liveness_bound_ms()
    }

    /// Applies fault `i` now, to node `index` when it targets one, with its history lines;
    /// returns where it went when it took effect.
    pub(super) fn apply_fault(&self, i: usize, index: u32) -> Option<(u32, String)> {
        let f = &self.faults[i];
        let id = f.id(i);
        let target =
            if f.kind.needs_a_node() { format!("n{index}") } else { crate::fault::untargeted(f.kind).to_owned() };
        self.record(fault_line(self, id, f, &target, FaultPhase::Requested, String::new()));
        let outcome = super::fault::apply(self, f, index);
        self.record(crate::fault::outcome_line_at(id, f, &target, &outcome, self.clock.now_ns()));
        outcome.is_ok().then_some((index, target))
    }

    /// Heals fault `i`, applied to `index` as `target`, with its history line.
    pub(super) fn heal_fault(&self, i: usize, (index, target): (u32, String)) {
        let f = &self.faults[i];
        let (phase, detail) = match super::fault::heal(self, f, index) {
            Ok(d) => (FaultPhase::Healed, d),
            Err(e) => (FaultPhase::HealFailed, e),
        };
        self.record(fault_line(self, f.id(i), f, &target, phase, detail));
    }

    pub(super) fn record(&self, line: HistoryLine) {
        self.rec.push(line);
    }

    /// The store's and the model service's audit logs, the witness's records, the snapshot and
    /// the seal; before them, a node the simulation held
    /// for spinning, as the environment drifting (no verdict stands on such a world).
    fn close(&self) -> Vec<HistoryLine> {
        for (node, gate) in self.gates.lock().unwrap_or_else(PoisonError::into_inner).iter() {
            if let Some(at) = gate.spun() {
                self.rec.push(HistoryLine::Environment(EnvEvent {
                    change: EnvChange::ContainerOther,
                    subject: node.clone(),
                    source: "sim".into(),
                    at_ns: self.clock.at_ns(at),
                    detail: "a task spun at one virtual instant (a busy loop that never waits): the simulation held it for good".into(),
                }));
            }
        }
        for record in self.store.audit_after(0) {
            self.rec.push(HistoryLine::Audit(record));
        }
        for record in self.store.model().audit_after(0) {
            self.rec.push(HistoryLine::Model(record));
        }
        for line in self.witness.take_lines() {
            self.rec.push(line);
        }
        let view = self.store.tenant_view(TENANT);
        let left = view["collections"]
            .as_array()
            .map(|cs| {
                cs.iter().filter(|c| c["live"] == false).filter_map(|c| c["name"].as_str().map(str::to_owned)).collect()
            })
            .unwrap_or_default();
        self.rec.push(HistoryLine::Snapshot(Snapshot {
            ended_ns: self.clock.now_ns(),
            faults_still_applied: vec![],
            temporary_collections_left: left,
            extended_ms: None,
            versions: [("harness".to_owned(), env!("CARGO_PKG_VERSION").to_owned())].into(),
            witness_gaps: Vec::new(),
            stopped: None,
            seal: None,
        }));
        let mut lines = self.rec.take();
        // Sealed in full only when written (`seeds::keep`): judged here, it never leaves.
        crate::history::seal_counts(&mut lines);
        lines
    }
}

/// Applies and heals the schedule's faults at their times, each with its history lines; arms
/// the triggered ones at theirs (and fails them a liveness bound later if their event never came).
async fn drive(w: Arc<World>) {
    const HEAL: u8 = 0;
    const APPLY: u8 = 1;
    const ARM: u8 = 2;
    const EXPIRE: u8 = 3;
    let t0 = Instant::now();
    // (ms, what, index): at one ms, heals before applies.
    let mut steps: Vec<(u64, u8, usize)> = Vec::new();
    for (i, f) in w.faults.iter().enumerate() {
        if f.on.is_some() {
            steps.push((f.at_ms(), ARM, i));
            steps.push((f.at_ms().saturating_add(w.liveness_bound_ms()), EXPIRE, i));
        } else {
            steps.push((f.at_ms(), APPLY, i));
            steps.push((f.at_ms().saturating_add(f.duration_ms()), HEAL, i));
        }
    }
    steps.sort_unstable();
    let mut applied: Vec<Option<(u32, String)>> = vec![None; w.faults.len()];
    for (ms, step, i) in steps {
        tokio::time::sleep_until(t0 + Duration::from_millis(ms)).await;
        match step {
            APPLY => applied[i] = w.apply_fault(i, w.target(&w.faults[i])),
            HEAL => {
                if let Some(a) = applied[i].take() {
                    w.heal_fault(i, a);
                }
            }
            ARM => super::trigger::arm(&w, i),
            _ => super::trigger::expire(&w, i),
        }
    }
}

pub(super) fn fault_line(
    w: &World,
    id: u64,
    f: &Fault,
    target: &str,
    phase: FaultPhase,
    detail: String,
) -> HistoryLine {
    HistoryLine::Fault(FaultEvent {
        id,
        fault: f.kind,
        target: target.to_owned(),
        phase,
        at_ns: w.clock.now_ns(),
        detail,
        redis_link: None,
        outlasts_ms: (phase == FaultPhase::Healed).then(|| crate::fault::outlasts_heal_ms(f)).flatten(),
    })
}

/// The observer: each server's holder, ttl and role every [`OBSERVER_EVERY`], until `stop`, as
/// the container lane's `docker exec redis-cli` reads them (a frozen or restarting server answers
/// nothing).
async fn observe(w: Arc<World>, stop: CancellationToken) {
    let mut tick = tokio::time::interval(OBSERVER_EVERY);
    // Bounded by `stop`.
    loop {
        tokio::select! {
            biased;
            () = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        for server in w.redis.servers().clone() {
            let sample = sample(&w, &server);
            w.record(HistoryLine::Observer(sample));
        }
    }
}

/// One server's sample: read without touching it (a `GET` on a master would expire the key and
/// replicate a `DEL`, which a real observer's read also does: so it reads through the server).
fn sample(w: &World, server: &Arc<Server>) -> ObserverSample {
    let unreachable = Server::until(&server.down_until).is_some() || Server::until(&server.frozen_until).is_some();
    let at_ns = w.clock.now_ns();
    if unreachable {
        let error = Some("no answer (restarting or frozen)".to_owned());
        return ObserverSample {
            instance: server.name.into(),
            at_ns,
            holder: None,
            ttl_ms: None,
            role: None,
            error,
            asked_ns: None,
        };
    }
    let args = |a: &[&str]| a.iter().map(|x| x.as_bytes().to_vec()).collect::<Vec<_>>();
    let holder = w.redis.exec(server, &args(&["GET", LEASE_KEY]));
    let ttl = w.redis.exec(server, &args(&["PTTL", LEASE_KEY]));
    let role = match server.role() {
        Role::Primary => "master",
        Role::Replica => "slave",
    };
    ObserverSample {
        instance: server.name.into(),
        at_ns,
        holder: match holder {
            Reply::Bulk(b) => Some(String::from_utf8_lossy(&b).into_owned()),
            _ => None,
        },
        ttl_ms: match ttl {
            Reply::Int(n) if n >= 0 => Some(n),
            _ => None,
        },
        role: Some(role.into()),
        error: None,
        asked_ns: None,
    }
}
