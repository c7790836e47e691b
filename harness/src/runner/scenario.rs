//! Scenario files (TOML, docs/scenarios.md): what a run is. A plain serde struct that refuses
//! unknown fields, then one `validate()`; every error names the file, the line and the field.
//! Parsing only: the runner turns a scenario into a run.

use std::path::{Path, PathBuf};

use leasequake_reports::history::{EventKind, ExpectedFailure, FenceSource, StoreOp, StorePolicy};
use serde::Deserialize;

pub mod file;
pub mod origin;
pub mod smaller;

/// A scenario file's problem: where, which field, what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{}{}: {}{}",
    file.display(),
    line.map(|l| format!(":{l}")).unwrap_or_default(),
    if field.is_empty() { String::new() } else { format!("`{}`: ", leasequake_reports::printable(field)) },
    leasequake_reports::escaped(message)
)]
pub struct ScenarioError {
    /// The file.
    pub file: PathBuf,
    /// The line, when known.
    pub line: Option<usize>,
    /// The field (dotted path, `faults[2].target`); empty for the file as a whole.
    pub field: String,
    /// What is wrong and what would be right.
    pub message: String,
}

/// One scenario.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Unique name.
    pub name: String,
    /// One line, for `leasequake list`.
    pub description: String,
    /// The incident it reproduces, in a paragraph.
    pub incident: String,
    /// Seed; random (and recorded) when absent.
    pub seed: Option<u64>,
    /// Run length.
    pub duration_s: u64,
    /// A known-unsafe configuration shown on purpose.
    pub expected: Option<Expected>,
    /// Where a scenario of the regression corpus came from (`scenarios/found/`).
    pub origin: Option<origin::Origin>,
    /// Judge `bounded_waste`: after truly losing ownership, a node stops working (model calls,
    /// store calls) within this many ms (a paused node is excused: it cannot react).
    pub waste_budget_ms: Option<u64>,
    /// The nodes.
    pub nodes: Nodes,
    /// Lease durations.
    pub lease: Lease,
    /// Round shape.
    #[serde(default)]
    pub pipeline: Pipeline,
    /// Store policy and fence source.
    pub store: Store,
    /// Sentinel timings.
    #[serde(default)]
    pub sentinel: Sentinel,
    /// Faults, in schedule order.
    #[serde(default)]
    pub faults: Vec<Fault>,
    /// Faults drawn from the seed, added to `faults` at run time.
    pub random: Option<Random>,
    /// How the simulation draws its own schedule (`leasequake sim`, a file with neither
    /// `[[faults]]` nor `[random]`).
    pub sim: Option<SimDraw>,
}

/// `[sim]`: the simulation's own draw, widened (docs/sim.md).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimDraw {
    /// Swarm testing: each seed enables a random subset of the fault kinds and draws only from
    /// it, so that a kind's effects are not always diluted by every other kind's.
    #[serde(default)]
    pub swarm: bool,
    /// Some faults on a node wait for a step of the pipeline (`on = "checkpoint-N"`, `acquired`,
    /// a store call, ...) instead of a time: the phases a time rarely hits.
    #[serde(default)]
    pub triggers: bool,
}

/// `[random]`: a seeded random schedule within bounds (drawn with ChaCha8, version-stable).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Random {
    /// How many faults to draw.
    pub faults: u32,
    /// Which kinds to draw from (partition, pause, stall_renewal, crash, slow_store,
    /// failing_store, slow_model).
    pub kinds: Vec<FaultKind>,
    /// No fault starts before this.
    pub from_s: u64,
    /// Every fault is healed by this.
    pub until_s: u64,
    /// Longest fault.
    pub max_duration_s: u64,
}

/// `expected`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expected {
    /// The property expected to be violated.
    pub property: String,
    /// Why.
    pub why: String,
    /// Properties the same hazard may violate as well.
    #[serde(default)]
    pub also: Vec<String>,
}

/// `[nodes]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Nodes {
    /// How many.
    pub count: u32,
    /// Node command (default: the reference node).
    pub command: Option<Vec<String>>,
    /// The nodes reach Redis as Sentinel-aware clients do: their proxies follow any failover,
    /// declared or not, the moment the observer sees a new master. Without it a failover no fault
    /// declared is drift, and the run is inconclusive.
    #[serde(default)]
    pub follow_failovers: bool,
}

/// `[lease]`: ttl, and optionally the others (default: production ratios).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lease {
    /// Lease ttl.
    pub ttl_ms: u64,
    /// Renewal interval (default ttl/3).
    pub renew_ms: Option<u64>,
    /// Acquire wait (default ttl/4).
    pub acquire_wait_ms: Option<u64>,
}

/// `[pipeline]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Pipeline {
    /// Batches per round.
    pub batches: u32,
    /// Points per batch.
    pub batch_size: u32,
    /// Model call time.
    pub embed_ms: u64,
    /// Preparation time.
    pub prepare_ms: u64,
    /// Checkpoints that run the owner check.
    pub checkpoints: Vec<u8>,
    /// Pause between rounds.
    pub pause_ms: u64,
}

impl Default for Pipeline {
    fn default() -> Self {
        Self {
            batches: 3,
            batch_size: 16,
            embed_ms: 100,
            prepare_ms: 50,
            checkpoints: (1..=7).collect(),
            pause_ms: 100,
        }
    }
}

/// `[store]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Store {
    /// `enforce` or `observe`.
    pub policy: StorePolicy,
    /// `redis` or `store`.
    pub fence_source: FenceSource,
    /// Added latency on store responses, ms.
    #[serde(default)]
    pub latency_ms: u64,
}

/// `[sentinel]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Sentinel {
    /// `down-after-milliseconds`.
    pub down_after_ms: u64,
    /// `failover-timeout`.
    pub failover_timeout_ms: u64,
}

impl Default for Sentinel {
    fn default() -> Self {
        Self { down_after_ms: 1000, failover_timeout_ms: 3000 }
    }
}

pub use leasequake_reports::history::FaultKind;

/// Which link a partition cuts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Link {
    /// Node <-> Redis.
    Redis,
    /// Node <-> store.
    Store,
    /// Both.
    Both,
}

/// Which way a link fault acts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Server to node (toxiproxy's `downstream`).
    Replies,
    /// Node to server (`upstream`).
    Requests,
    /// Both ways.
    Both,
}

/// The lease commands a fault is aimed at, as the witness reads them off the node's Redis link:
/// `lose_replies` loses the reply to the next one, `slow_redis` delays each one's request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Aimed {
    /// An acquire (`SET NX`, or a script that takes a free key).
    Acquire,
    /// A renewal (`PEXPIRE`, a script extending the key, a set to the holding token).
    Renewal,
    /// A release (`DEL`, a compare-and-delete script).
    Release,
    /// Any command on the lease key (checks included).
    Lease,
}

impl Aimed {
    /// The command as the wire reads it (`None`: any command on the lease key).
    #[must_use]
    pub fn op(self) -> Option<leasequake_reports::wire::LeaseOp> {
        use leasequake_reports::wire::LeaseOp;
        match self {
            Self::Acquire => Some(LeaseOp::Acquire),
            Self::Renewal => Some(LeaseOp::Renew),
            Self::Release => Some(LeaseOp::Release),
            Self::Lease => None,
        }
    }

    /// Whether a command read as `op` (`None`: not on the lease key) is one aimed at.
    #[must_use]
    pub fn hits(self, op: Option<leasequake_reports::wire::LeaseOp>) -> bool {
        op.is_some() && self.op().is_none_or(|want| op == Some(want))
    }

    /// Its name in a scenario file.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Acquire => "acquire",
            Self::Renewal => "renewal",
            Self::Release => "release",
            Self::Lease => "lease",
        }
    }

    /// Its name in the proxy's API (`command` of an aimed toxic).
    #[must_use]
    pub fn proxy_command(self) -> &'static str {
        match self {
            Self::Renewal => "renew",
            other => other.as_str(),
        }
    }
}

/// How a partition cuts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Data dropped, connections held.
    Blackhole,
    /// Connections reset.
    Reset,
    /// Failover: freeze the primary (SIGSTOP to its redis-server).
    Pause,
    /// Failover: cut the primary from the replication network only.
    Isolate,
    /// Failover: asked of Sentinel (`SENTINEL FAILOVER`), both instances healthy.
    Manual,
}

/// `[[faults]]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fault {
    /// What.
    pub kind: FaultKind,
    /// A node (`n1`) or a role (`owner`, `non-owner`); not used by store faults.
    pub target: Option<String>,
    /// When, from the start of the run.
    pub at_s: u64,
    /// How long until healed.
    pub duration_s: u64,
    /// Partition link.
    pub link: Option<Link>,
    /// Partition mode.
    pub mode: Option<Mode>,
    /// Latency, for slow faults.
    pub latency_ms: Option<u64>,
    /// `slow_redis`: each delay is `latency_ms` ± up to this much.
    pub jitter_ms: Option<u64>,
    /// `slow_redis`: which way the latency acts (`replies`, `requests`, `both`).
    pub direction: Option<Direction>,
    /// `lose_replies`: lose only the reply of the node's next such lease command (`acquire`,
    /// `renewal`, `release`, `lease`: any), read off its Redis link, instead of every reply;
    /// `slow_redis`: delay only the requests of such commands.
    pub command: Option<Aimed>,
    /// Failover: how long after the promotion the nodes' Redis proxies follow the new primary.
    pub follow_ms: Option<u64>,
    /// Failover: nodes whose Redis proxies never follow (stale clients on the old primary).
    pub never_follow: Option<Vec<String>>,
    /// Failover: each named node's own delay, ms after the promotion, before its Redis proxy
    /// follows (`{ n2 = 2500 }`); the nodes not named follow after `follow_ms`.
    pub follow_ms_by_node: Option<std::collections::BTreeMap<String, u64>>,
    /// `clock_jump`: how far the clock moves, ms (negative: back).
    pub jump_ms: Option<i64>,
    /// `failover` with `mode = "isolate"`: right after the cut, delete the lease key on the cut
    /// primary, so that the next acquire lands there alone: acknowledged, never replicated, and
    /// (verified) missing on the new primary.
    pub unreplicated_acquire: Option<bool>,
    /// When, to the ms (within `at_s`'s second): exported schedules carry it.
    pub at_ms: Option<u64>,
    /// How long, to the ms (within `duration_s`, above the second before it).
    pub duration_ms: Option<u64>,
    /// Exact times (start, duration) in ms: drawn and replayed schedules, or a file's `at_ms` and
    /// `duration_ms`.
    #[serde(skip)]
    pub exact_ms: Option<(u64, u64)>,
    /// The number the recorded run gave this fault, for a replay (not in files): a repro's
    /// `fault N` in the terminal and the history is the original's. `None`: its place in the list.
    #[serde(skip)]
    pub number: Option<u64>,
    /// An event trigger: from `at_s` on, wait for it and apply the fault the moment it happens
    /// (`acquired`: right after a node acquires; `checkpoint-N`: right after a node passes
    /// checkpoint N, before its next step). `duration_s` counts from then.
    pub on: Option<String>,
}

/// When a triggered fault fires: right after a node reports an event, or the observer sees one
/// (`on = "..."`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// Right after a node passes checkpoint N (it holds at the sync point until the fault is in).
    Checkpoint(u8),
    /// Right after a node reports this event (it is not held: the fault follows within ms).
    Event(EventTrigger),
    /// Right after the observer sees this in Redis (within one sample, 250 ms).
    Observed(ObservedTrigger),
}

/// What the observer can see that a fault can follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObservedTrigger {
    /// `key_expired`: the primary's lease key ran out: its holder changed (gone, or another
    /// token) after the moment its last sample's PTTL said it would expire. A key released or
    /// overwritten earlier than that did not expire. The node that held it is the one triggering.
    KeyExpired,
    /// `role_changed`: a Redis instance's role differs from its previous sample's.
    RoleChanged,
}

/// What the observer saw, handed to the triggers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observed {
    /// The key of `node`'s acquisition expired on the primary.
    KeyExpired {
        /// The node whose token the key held.
        node: String,
    },
    /// An instance's role changed.
    RoleChanged {
        /// The instance.
        instance: String,
        /// Its role now (`master`, `slave`).
        role: String,
    },
}

/// The node events a fault can follow, and the names scenario files give them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventTrigger {
    /// `acquire_attempt`: a node began an acquire.
    AcquireAttempt,
    /// `acquired`: a node acquired the lease.
    Acquired,
    /// `renewed`: a renewal was confirmed (the next one is a renewal interval away).
    Renewed,
    /// `ownership_lost`: a node reported its loss.
    OwnershipLost,
    /// `round_aborted`: a round was cancelled.
    RoundAborted,
    /// `released`: a node released the lease.
    Released,
    /// `sync_finished`: a round completed.
    SyncFinished,
    /// `store_call_sent` or `store_call_sent:OP`: a store call (of that operation) was sent.
    StoreCallSent(Option<StoreOp>),
    /// `model_call` or `model_call:N`: a model call (for batch N) finished.
    ModelCall(Option<u32>),
}

/// Every trigger name a scenario may use, for error messages and docs.
pub const TRIGGER_NAMES: &str = "`checkpoint-1` .. `checkpoint-7`, `key_expired`, `role_changed`, `acquire_attempt`, `acquired`, `renewed`, `ownership_lost`, `round_aborted`, `released`, `sync_finished`, `store_call_sent` (or `store_call_sent:persist_record`, any op), `model_call` (or `model_call:0`, a batch)";

impl Trigger {
    /// Parses a scenario's `on`.
    #[must_use]
    pub fn parse(on: &str) -> Option<Self> {
        if let Some(n) = on.strip_prefix("checkpoint-") {
            // Exactly the digits 1..=7: `checkpoint-07` is a typo, not checkpoint 7.
            return (n.len() == 1)
                .then(|| n.parse().ok())
                .flatten()
                .filter(|n| (1..=7).contains(n))
                .map(Self::Checkpoint);
        }
        match on {
            "key_expired" => return Some(Self::Observed(ObservedTrigger::KeyExpired)),
            "role_changed" => return Some(Self::Observed(ObservedTrigger::RoleChanged)),
            _ => {}
        }
        let (name, arg) = match on.split_once(':') {
            Some((name, arg)) => (name, Some(arg)),
            None => (on, None),
        };
        let event = match (name, arg) {
            ("acquire_attempt", None) => EventTrigger::AcquireAttempt,
            ("acquired", None) => EventTrigger::Acquired,
            ("renewed", None) => EventTrigger::Renewed,
            ("ownership_lost", None) => EventTrigger::OwnershipLost,
            ("round_aborted", None) => EventTrigger::RoundAborted,
            ("released", None) => EventTrigger::Released,
            ("sync_finished", None) => EventTrigger::SyncFinished,
            ("store_call_sent", None) => EventTrigger::StoreCallSent(None),
            ("store_call_sent", Some(op)) => {
                EventTrigger::StoreCallSent(Some(serde_json::from_value(serde_json::Value::from(op)).ok()?))
            }
            ("model_call", None) => EventTrigger::ModelCall(None),
            ("model_call", Some(b)) if !b.is_empty() && b.len() <= 4 && b.bytes().all(|c| c.is_ascii_digit()) => {
                EventTrigger::ModelCall(Some(b.parse().ok()?))
            }
            _ => return None,
        };
        Some(Self::Event(event))
    }

    /// Whether something the observer saw fires this trigger.
    #[must_use]
    pub fn fired_by_observed(&self, seen: &Observed) -> bool {
        matches!(
            (self, seen),
            (Self::Observed(ObservedTrigger::KeyExpired), Observed::KeyExpired { .. })
                | (Self::Observed(ObservedTrigger::RoleChanged), Observed::RoleChanged { .. })
        )
    }

    /// Whether a node's event fires this trigger (a checkpoint trigger fires on its sync point).
    #[must_use]
    pub fn fired_by(&self, kind: &EventKind) -> bool {
        use EventTrigger as E;
        match (self, kind) {
            (Self::Checkpoint(n), EventKind::SyncPoint { number, .. }) => n == number,
            (Self::Event(e), kind) => match (e, kind) {
                (E::AcquireAttempt, EventKind::AcquireAttempt)
                | (E::Acquired, EventKind::Acquired { .. })
                | (E::Renewed, EventKind::Renewed { .. })
                | (E::OwnershipLost, EventKind::OwnershipLost { .. })
                | (E::RoundAborted, EventKind::RoundAborted { .. })
                | (E::Released, EventKind::Released { .. })
                | (E::SyncFinished, EventKind::SyncFinished { .. }) => true,
                (E::StoreCallSent(want), EventKind::StoreCallSent { op, .. }) => want.is_none_or(|w| w == *op),
                (E::ModelCall(want), EventKind::ModelCall { batch, .. }) => want.is_none_or(|w| w == *batch),
                _ => false,
            },
            _ => false,
        }
    }
}

impl Fault {
    /// When it is applied (or armed), ms from the start.
    #[must_use]
    pub fn at_ms(&self) -> u64 {
        self.exact_ms.map_or(self.at_s * 1000, |e| e.0)
    }

    /// How long it lasts, ms.
    #[must_use]
    pub fn duration_ms(&self) -> u64 {
        self.exact_ms.map_or(self.duration_s * 1000, |e| e.1)
    }

    /// Its number in the history and the terminal, given its place in the schedule (from 0): a
    /// replayed fault keeps the recorded run's number.
    #[must_use]
    pub fn id(&self, index: usize) -> u64 {
        self.number.unwrap_or(index as u64 + 1)
    }

    /// The trigger, if the fault has a valid one.
    #[must_use]
    pub fn trigger(&self) -> Option<Trigger> {
        Trigger::parse(self.on.as_deref()?)
    }
}

impl Scenario {
    /// The renewal interval in force.
    #[must_use]
    pub fn renew_ms(&self) -> u64 {
        self.lease.renew_ms.unwrap_or(self.lease.ttl_ms / 3)
    }
    /// The timeout of every Redis command a node sends: a fifteenth of the ttl, within 50 ms to
    /// 2 s, but at least 150 ms (or a quarter of the ttl, if shorter). On a loaded 2-core machine
    /// (CI running four environments at once) a Redis round trip can take 70 ms and more; a
    /// 66 ms timeout then turned every check into a loss for seconds and no round finished.
    #[must_use]
    pub fn command_timeout_ms(&self) -> u64 {
        let ttl = self.lease.ttl_ms;
        (ttl / 15).clamp(50, 2000).max(150.min(ttl / 4))
    }
    /// The acquire wait in force.
    #[must_use]
    pub fn acquire_wait_ms(&self) -> u64 {
        self.lease.acquire_wait_ms.unwrap_or(self.lease.ttl_ms / 4)
    }
    /// After the last heal, a complete sync must land within this: a lease that may still be held
    /// (ttl), one acquire wait, and two rounds of the pipeline.
    #[must_use]
    pub fn liveness_bound_ms(&self) -> u64 {
        self.lease.ttl_ms + self.acquire_wait_ms() + 2 * self.round_estimate_ms() + 1000
    }
    /// One round of the pipeline as the bound counts it: its model and store time, from the
    /// scenario (the checker lengthens the bound when this run's rounds took longer).
    #[must_use]
    pub fn round_estimate_ms(&self) -> u64 {
        let p = &self.pipeline;
        p.prepare_ms
            + u64::from(p.batches) * (p.embed_ms + self.store.latency_ms * 2)
            + 8 * self.store.latency_ms
            + p.pause_ms
    }
    /// The expected failure, as the history records it.
    #[must_use]
    pub fn expected_failure(&self) -> Option<ExpectedFailure> {
        self.expected.as_ref().map(|e| ExpectedFailure {
            property: e.property.clone(),
            why: e.why.clone(),
            also: e.also.clone(),
        })
    }
}

impl Scenario {
    /// The faults a run applies: the file's, then `count` drawn from `seed` (ChaCha8: the same
    /// seed draws the same schedule on every machine and version of this code).
    #[must_use]
    pub fn schedule(&self, seed: u64) -> Vec<Fault> {
        use rand::{Rng, SeedableRng};
        let mut faults = self.faults.clone();
        let Some(r) = &self.random else { return faults };
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        // Faults that must not overlap another of their group: two store-wide faults at once
        // cannot be told apart by any probe; a process fault (crash, pause, stall) on a node
        // another has crashed or stopped cannot take effect, and "owner" is only resolved when
        // it applies, so no two process faults overlap on any node.
        let group = |k: FaultKind| {
            if k.store_wide() {
                Some(0)
            } else {
                k.stops_a_process().then_some(1)
            }
        };
        let mut windows: [Vec<(u64, u64)>; 2] = Default::default();
        for _ in 0..r.faults {
            // A draw that overlaps another of its group is drawn again (bounded), else dropped,
            // so every drawn fault is verifiable.
            let mut draw = || {
                let kind = r.kinds[rng.random_range(0..r.kinds.len())];
                let duration_ms = rng.random_range(500..=r.max_duration_s * 1000);
                let at_ms = rng.random_range(r.from_s * 1000..=r.until_s * 1000 - duration_ms);
                (kind, duration_ms, at_ms)
            };
            let apart = |windows: &[Vec<(u64, u64)>; 2], (kind, d, at): (FaultKind, u64, u64)| {
                group(kind).is_none_or(|g| windows[g].iter().all(|(a, b)| at + d <= *a || *b <= at))
            };
            let mut drawn = draw();
            for _ in 0..20 {
                if apart(&windows, drawn) {
                    break;
                }
                drawn = draw();
            }
            if !apart(&windows, drawn) {
                continue;
            }
            let (kind, duration_ms, at_ms) = drawn;
            if let Some(g) = group(kind) {
                windows[g].push((at_ms, at_ms + duration_ms));
            }
            let node_fault = !kind.store_wide();
            // (failover and redis_restart are refused in `kinds` by validation)
            // Only the owner calls the model, so a slow model goes to the owner (the draw is
            // still made: every other fault of a seed stays as it was).
            let target = node_fault.then(|| match rng.random_range(0..=self.nodes.count + 1) {
                _ if kind == FaultKind::SlowModel => "owner".to_owned(),
                0 | 1 => "owner".to_owned(),
                n => format!("n{}", n - 1),
            });
            let partition = kind == FaultKind::Partition;
            faults.push(Fault {
                kind,
                target,
                at_s: at_ms / 1000,
                duration_s: duration_ms.div_ceil(1000),
                link: partition.then(|| [Link::Redis, Link::Store, Link::Both][rng.random_range(0..3)]),
                mode: partition.then(|| if rng.random_bool(0.5) { Mode::Blackhole } else { Mode::Reset }),
                latency_ms: matches!(kind, FaultKind::SlowStore | FaultKind::SlowModel)
                    .then(|| rng.random_range(100..=800)),
                jitter_ms: None,
                direction: None,
                command: None,
                follow_ms: None,
                never_follow: None,
                follow_ms_by_node: None,
                jump_ms: None,
                unreplicated_acquire: None,
                at_ms: None,
                duration_ms: None,
                exact_ms: Some((at_ms, duration_ms)),
                number: None,
                on: None,
            });
        }
        faults
    }
}

/// The largest clock jump, ms (a day), forward or back.
pub const JUMP_MS_MAX: u64 = 86_400_000;

/// The most latency a slow fault may add, ms: beyond it a run is all waiting.
pub const LATENCY_MS_MAX: u64 = 60_000;

/// `slow_redis`'s own fields: a latency within range, a jitter no larger than it, a node target;
/// and `jitter_ms` and `direction` belong to it alone.
fn slow_redis_fields(f: &Fault) -> Result<(), (&'static str, String)> {
    if f.kind != FaultKind::SlowRedis {
        if f.jitter_ms.is_some() || f.direction.is_some() {
            let name = if f.jitter_ms.is_some() { "jitter_ms" } else { "direction" };
            return Err((name, format!("{name} belongs to slow_redis, not {}", f.kind)));
        }
        return Ok(());
    }
    let latency = f.latency_ms.unwrap_or(0);
    if !(1..=LATENCY_MS_MAX).contains(&latency) {
        return Err(("latency_ms", format!("{latency} is not between 1 and {LATENCY_MS_MAX}")));
    }
    if let Some(j) = f.jitter_ms.filter(|j| *j > latency) {
        return Err(("jitter_ms", format!("{j} is more than latency_ms ({latency}): a delay cannot be negative")));
    }
    if f.target.is_none() {
        return Err(("target", "slow_redis slows one node's link: name a node, `owner` or `non-owner`".into()));
    }
    Ok(())
}

/// One fault of `schedule.json`, as the runner records it and `replay` reads it back: one type
/// for both, so a field added to a fault is written and read alike. Fields added after the first
/// schedules were recorded default to absent, so older files still replay.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
pub struct ScheduleStep {
    /// The fault's number in the recorded run (absent in schedules recorded before it was).
    #[serde(default)]
    pub id: Option<u64>,
    pub kind: FaultKind,
    /// The node it resolved to, when the fault named one (`owner` resolved).
    pub target: Option<String>,
    /// When it was applied, ms after the schedule began.
    pub at_ms: u64,
    pub duration_ms: u64,
    pub link: Option<Link>,
    pub mode: Option<Mode>,
    pub latency_ms: Option<u64>,
    #[serde(default)]
    pub jitter_ms: Option<u64>,
    #[serde(default)]
    pub direction: Option<Direction>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Aimed>,
    pub follow_ms: Option<u64>,
    pub never_follow: Option<Vec<String>>,
    #[serde(default)]
    pub follow_ms_by_node: Option<std::collections::BTreeMap<String, u64>>,
    #[serde(default)]
    pub jump_ms: Option<i64>,
    #[serde(default)]
    pub unreplicated_acquire: Option<bool>,
    /// A triggered fault's event: a replay waits for the same event on the node that triggered
    /// it (`target`); a time alone would miss a window of microseconds, such as the one right
    /// after checkpoint 7. Absent before triggers were recorded.
    #[serde(default)]
    pub on: Option<String>,
    /// When a triggered fault was armed, ms.
    #[serde(default)]
    pub armed_ms: Option<u64>,
}

impl ScheduleStep {
    /// Fault `f`, numbered `id`, as executed: on `target`, at `at_ms`.
    #[must_use]
    pub fn executed(id: u64, f: &Fault, target: &str, at_ms: u64) -> Self {
        Self {
            id: Some(id),
            kind: f.kind,
            target: f.target.is_some().then(|| target.to_owned()),
            at_ms,
            duration_ms: f.duration_ms(),
            link: f.link,
            mode: f.mode,
            latency_ms: f.latency_ms,
            jitter_ms: f.jitter_ms,
            direction: f.direction,
            command: f.command,
            follow_ms: f.follow_ms,
            never_follow: f.never_follow.clone(),
            follow_ms_by_node: f.follow_ms_by_node.clone(),
            jump_ms: f.jump_ms,
            unreplicated_acquire: f.unreplicated_acquire,
            on: f.trigger().and(f.on.clone()),
            armed_ms: f.trigger().map(|_| f.at_ms()),
        }
    }
}

/// The scenario of a recorded run, with its schedule as executed (`schedule.json`): the same
/// faults on the same targets at the same times, nothing drawn again. A triggered fault is armed
/// at its recorded time and waits for the same event on the node that triggered it (a fault on
/// Redis or the store, which names no node: on any node), as the incident's did.
pub fn replay(run_dir: &Path) -> Result<Scenario, ScenarioError> {
    let mut s = load(&run_dir.join("scenario.toml"))?;
    let file = run_dir.join("schedule.json");
    let problem = |message: String| ScenarioError { file: file.clone(), line: None, field: String::new(), message };
    let text =
        std::fs::read_to_string(&file).map_err(|e| problem(format!("cannot read: {e} (is this a run directory?)")))?;
    let steps: Vec<ScheduleStep> = serde_json::from_str(&text).map_err(|e| problem(e.to_string()))?;
    let faults = steps
        .into_iter()
        .map(|st| (st.armed_ms.unwrap_or(st.at_ms), st))
        .map(|(at_ms, st)| Fault {
            kind: st.kind,
            target: st.target,
            at_s: at_ms / 1000,
            duration_s: st.duration_ms.div_ceil(1000),
            link: st.link,
            mode: st.mode,
            latency_ms: st.latency_ms,
            jitter_ms: st.jitter_ms,
            direction: st.direction,
            command: st.command,
            follow_ms: st.follow_ms,
            never_follow: st.never_follow,
            follow_ms_by_node: st.follow_ms_by_node,
            jump_ms: st.jump_ms,
            unreplicated_acquire: st.unreplicated_acquire,
            at_ms: None,
            duration_ms: None,
            exact_ms: Some((at_ms, st.duration_ms)),
            number: st.id,
            on: st.on,
        })
        .collect();
    s.faults = faults;
    s.random = None;
    // A recorded fault may have been applied late (a loaded machine), and the run went on to the
    // liveness bound after it: the replay lasts as long. Ranges first, so the sum cannot overflow.
    let refused = |(field, message): (String, String)| ScenarioError { file: file.clone(), line: None, field, message };
    let checked = |s: &Scenario| ranges(s).map_err(refused);
    checked(&s)?;
    let bound_s = s.liveness_bound_ms().div_ceil(1000);
    // A triggered fault may fire up to one bound after it was armed (as `validate` allows).
    let wait_s = |f: &Fault| if f.on.is_some() { bound_s } else { 0 };
    let needed =
        s.faults.iter().map(|f| (f.at_ms() + f.duration_ms()).div_ceil(1000) + wait_s(f) + bound_s).max().unwrap_or(0);
    s.duration_s = s.duration_s.max(needed);
    checked(&s)?;
    validate(&s).map_err(refused)?;
    Ok(s)
}

/// Scenario `s` (read from `file`) with `count` nodes instead of its own (`leasequake sim
/// --nodes`), validated again: a fault of the file aimed at a node beyond `count` is refused.
///
/// # Errors
/// The scenario is not valid with `count` nodes.
pub fn with_nodes(mut s: Scenario, file: &Path, count: u32) -> Result<Scenario, ScenarioError> {
    s.nodes.count = count;
    validate(&s).map_err(|(field, message)| ScenarioError {
        file: file.to_path_buf(),
        line: None,
        field,
        message: format!("{message} (with --nodes {count})"),
    })?;
    Ok(s)
}

/// Reads and validates a scenario file.
pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
    let text = std::fs::read_to_string(path).map_err(|e| ScenarioError {
        file: path.to_path_buf(),
        line: None,
        field: String::new(),
        message: format!("cannot read: {e}"),
    })?;
    parse(path, &text)
}

/// Parses and validates scenario text (`path` names it in errors).
pub fn parse(path: &Path, text: &str) -> Result<Scenario, ScenarioError> {
    let scenario: Scenario = toml::from_str(text).map_err(|e| {
        let line = e.span().map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
        let message = e.message().to_owned();
        let named = message
            .split('`')
            .nth(1)
            .filter(|_| message.starts_with("unknown field") || message.starts_with("missing field"));
        let at = e.span().map_or(text.len(), |s| s.start.min(text.len()));
        let field = named.map_or_else(|| field_at(text, at), str::to_owned);
        ScenarioError { file: path.to_path_buf(), line, field, message }
    })?;
    let mut scenario = scenario;
    validate(&scenario).and_then(|()| exact_times(&mut scenario)).map_err(|(field, message)| ScenarioError {
        file: path.to_path_buf(),
        line: line_of(text, &field),
        field,
        message,
    })?;
    Ok(scenario)
}

/// The dotted field at byte `at` of a scenario's text: the key on that line (`duration_s`,
/// `lease.ttl_ms`, `faults[1].at_s`), or the table it is in; empty when it is neither.
fn field_at(text: &str, at: usize) -> String {
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let line = text[line_start..].lines().next().unwrap_or("");
    let key =
        line.split_once('=').map(|(k, _)| k.trim().trim_matches('"')).filter(|k| !k.is_empty() && !k.starts_with('['));
    match key {
        Some(k) => within_table(text, line_start, k),
        None => table_at(text, line_start),
    }
}

/// `key` prefixed with the table that holds byte `at` (`faults[1].`, `lease.`), if any.
fn within_table(text: &str, at: usize, key: &str) -> String {
    match table_at(text, at) {
        t if t.is_empty() => key.to_owned(),
        t => format!("{t}.{key}"),
    }
}

/// The table header above byte `at`: `lease`, or `faults[1]` for the second `[[faults]]`.
fn table_at(text: &str, at: usize) -> String {
    let mut table = String::new();
    let mut arrays: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for line in text[..at].lines().map(str::trim) {
        if let Some(name) = line.strip_prefix("[[").and_then(|l| l.split("]]").next()) {
            let n = arrays.entry(name.trim().to_owned()).and_modify(|n| *n += 1).or_insert(0);
            table = format!("{}[{n}]", name.trim());
        } else if let Some(name) = line.strip_prefix('[').and_then(|l| l.split(']').next()) {
            table = name.trim().to_owned();
        }
    }
    table
}

/// A fault's `at_ms` and `duration_ms`, when a file gives them, refine `at_s` and `duration_s`
/// (which every check reads): `at_ms` within `at_s`'s second, `duration_ms` above the second
/// before `duration_s` and at most `duration_s`.
fn exact_times(s: &mut Scenario) -> Result<(), (String, String)> {
    for (i, f) in s.faults.iter_mut().enumerate() {
        if f.at_ms.is_none() && f.duration_ms.is_none() {
            continue;
        }
        if f.on.is_some() && f.at_ms.is_some() {
            return Err((
                format!("faults[{i}].at_ms"),
                "a triggered fault begins at its event (at_s is when it is armed): drop at_ms (duration_ms may stay)"
                    .into(),
            ));
        }
        let at = f.at_ms.unwrap_or(f.at_s.saturating_mul(1000));
        if at / 1000 != f.at_s {
            return Err((
                format!("faults[{i}].at_ms"),
                format!("{at} is not within at_s = {} (set at_s = {})", f.at_s, at / 1000),
            ));
        }
        let duration = f.duration_ms.unwrap_or(f.duration_s.saturating_mul(1000));
        if duration.div_ceil(1000) != f.duration_s {
            return Err((
                format!("faults[{i}].duration_ms"),
                format!(
                    "{duration} does not round up to duration_s = {} (set duration_s = {})",
                    f.duration_s,
                    duration.div_ceil(1000)
                ),
            ));
        }
        f.exact_ms = Some((at, duration));
    }
    Ok(())
}

/// The line where `field` (a dotted path, maybe `faults[i].x`) is set, best effort.
fn line_of(text: &str, field: &str) -> Option<usize> {
    let (section, key) = match field.split_once('.') {
        Some((s, k)) => (Some(s), k),
        None => (None, field),
    };
    let mut start = 0;
    if let Some(section) = section {
        let (name, index) = match section.split_once('[') {
            Some((n, i)) => (n, i.trim_end_matches(']').parse::<usize>().ok()),
            None => (section, None),
        };
        let header = if index.is_some() { format!("[[{name}]]") } else { format!("[{name}]") };
        let mut seen = 0;
        let found = text.lines().enumerate().find(|(_, l)| {
            if l.trim() == header {
                seen += 1;
                seen - 1 == index.unwrap_or(0)
            } else {
                false
            }
        });
        match found {
            Some((i, _)) => start = i,
            // An inline table: `name = { ... }`.
            None => {
                return text
                    .lines()
                    .position(|l| l.trim_start().strip_prefix(name).is_some_and(|r| r.trim_start().starts_with('=')))
                    .map(|i| i + 1);
            }
        }
    }
    text.lines()
        .enumerate()
        .skip(start)
        .find(|(_, l)| l.trim_start().starts_with(key) && l.contains('='))
        .map(|(i, _)| i + 1)
        .or(Some(start + 1))
}

// The properties an expected failure can name are the checker's.
use crate::check::PROPERTIES;

/// The index of node `n` (exactly `n1` .. `n{count}`: `n01` or `n+1` is not `n1`).
fn node_index_ok(n: &str, count: u32) -> Option<u32> {
    let i = n.strip_prefix('n').and_then(|n| n.parse::<u32>().ok()).filter(|i| (1..=count).contains(i))?;
    (n == format!("n{i}")).then_some(i)
}

/// How much longer than a write pause Sentinel's down-after must be, ms: Sentinel took a 2 s
/// pause for a dead primary with down-after 1 s and failed over on its own.
const SENTINEL_MARGIN_MS: u64 = 3_000;

/// The least down-after for a Redis restart, ms: a restart takes ~0.75 s idle, seconds loaded.
const RESTART_DOWN_AFTER_MS: u64 = 3_000;

/// The longest scenario name: it names run directories and containers.
pub const NAME_MAX: usize = 64;

/// The longest run, s (a day); every time inside a scenario is bounded by it.
pub const DURATION_S_MAX: u64 = 86_400;

/// The longest lease time (ttl, acquire wait, a failover's follow delay), ms.
pub const LEASE_MS_MAX: u64 = 600_000;

/// The longest step of the pipeline (prepare, one model call, the pause between rounds), ms.
pub const STEP_MS_MAX: u64 = 60_000;

/// Every number of a scenario within its documented range (docs/scenarios.md), before any
/// arithmetic uses it: (field, value, least, most).
fn ranges(s: &Scenario) -> Result<(), (String, String)> {
    let mut checks: Vec<(String, u64, u64, u64)> = vec![
        ("duration_s".into(), s.duration_s, 1, DURATION_S_MAX),
        ("lease.ttl_ms".into(), s.lease.ttl_ms, 100, LEASE_MS_MAX),
        ("pipeline.batches".into(), u64::from(s.pipeline.batches), 1, 1_000),
        ("pipeline.batch_size".into(), u64::from(s.pipeline.batch_size), 1, 10_000),
        ("pipeline.embed_ms".into(), s.pipeline.embed_ms, 0, STEP_MS_MAX),
        ("pipeline.prepare_ms".into(), s.pipeline.prepare_ms, 0, STEP_MS_MAX),
        ("pipeline.pause_ms".into(), s.pipeline.pause_ms, 0, STEP_MS_MAX),
        ("store.latency_ms".into(), s.store.latency_ms, 0, LATENCY_MS_MAX),
        ("sentinel.down_after_ms".into(), s.sentinel.down_after_ms, 100, STEP_MS_MAX),
        ("sentinel.failover_timeout_ms".into(), s.sentinel.failover_timeout_ms, 100, LEASE_MS_MAX),
    ];
    let optional = [
        ("lease.renew_ms", s.lease.renew_ms, 1, LEASE_MS_MAX),
        ("lease.acquire_wait_ms", s.lease.acquire_wait_ms, 1, LEASE_MS_MAX),
        ("waste_budget_ms", s.waste_budget_ms, 0, DURATION_S_MAX * 1000),
    ];
    checks.extend(optional.into_iter().filter_map(|(f, v, lo, hi)| v.map(|v| (f.to_owned(), v, lo, hi))));
    for (i, f) in s.faults.iter().enumerate() {
        let field = |k: &str| format!("faults[{i}].{k}");
        checks.push((field("at_s"), f.at_s, 0, DURATION_S_MAX));
        checks.push((field("duration_s"), f.duration_s, 0, DURATION_S_MAX));
        let optional = [
            ("latency_ms", f.latency_ms, LATENCY_MS_MAX),
            ("jitter_ms", f.jitter_ms, LATENCY_MS_MAX),
            ("follow_ms", f.follow_ms, LEASE_MS_MAX),
        ];
        checks.extend(optional.into_iter().filter_map(|(k, v, hi)| v.map(|v| (field(k), v, 0, hi))));
        for (node, ms) in f.follow_ms_by_node.iter().flatten() {
            checks.push((field(&format!("follow_ms_by_node.{node}")), *ms, 0, LEASE_MS_MAX));
        }
    }
    if let Some(r) = &s.random {
        checks.push(("random.from_s".into(), r.from_s, 0, DURATION_S_MAX));
        checks.push(("random.until_s".into(), r.until_s, 0, DURATION_S_MAX));
        checks.push(("random.max_duration_s".into(), r.max_duration_s, 1, DURATION_S_MAX));
    }
    if let Some((field, v, lo, hi)) = checks.into_iter().find(|(_, v, lo, hi)| !(*lo..=*hi).contains(v)) {
        return Err((field, format!("{v} is outside {lo}..={hi}")));
    }
    Ok(())
}

fn validate(s: &Scenario) -> Result<(), (String, String)> {
    let bad = |field: &str, message: String| Err((field.to_owned(), message));
    let name_ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
    if s.name.is_empty() || s.name.len() > NAME_MAX || !s.name.chars().all(name_ok) {
        return bad("name", format!("must be 1 to {NAME_MAX} characters of a-z, 0-9 and '-'"));
    }
    ranges(s)?;
    if !(1..=16).contains(&s.nodes.count) {
        return bad("nodes.count", format!("{} is not between 1 and 16", s.nodes.count));
    }
    if s.lease.ttl_ms < 100 {
        return bad("lease.ttl_ms", format!("{} ms is too short (at least 100)", s.lease.ttl_ms));
    }
    if s.renew_ms() == 0 || s.renew_ms() >= s.lease.ttl_ms {
        return bad("lease.renew_ms", format!("{} must be above 0 and below ttl_ms {}", s.renew_ms(), s.lease.ttl_ms));
    }
    if s.acquire_wait_ms() == 0 {
        return bad("lease.acquire_wait_ms", "must be above 0".into());
    }
    if let Some(c) = s.pipeline.checkpoints.iter().find(|c| !(1..=7).contains(*c)) {
        return bad("pipeline.checkpoints", format!("checkpoint {c} does not exist (1 to 7)"));
    }
    if s.pipeline.batches == 0 {
        return bad("pipeline.batches", "must be at least 1".into());
    }
    if let Some(sim) = s.sim.filter(|_| !s.faults.is_empty() || s.random.is_some()) {
        return bad(
            if sim.triggers && !sim.swarm { "sim.triggers" } else { "sim.swarm" },
            "[sim] shapes the simulation's own draw, which runs only for a file with neither [[faults]] nor \
             [random]: remove one or the other"
                .into(),
        );
    }
    if let Some(e) = &s.expected {
        if !PROPERTIES.contains(&e.property.as_str()) {
            return bad(
                "expected.property",
                format!("`{}` is not a property; one of {}", e.property, PROPERTIES.join(", ")),
            );
        }
        if let Some(p) = e.also.iter().find(|p| !PROPERTIES.contains(&p.as_str())) {
            return bad("expected.also", format!("`{p}` is not a property; one of {}", PROPERTIES.join(", ")));
        }
    }
    if let Some(o) = &s.origin {
        origin::validate(o)?;
    }
    let bound_s = s.liveness_bound_ms().div_ceil(1000);
    for (i, f) in s.faults.iter().enumerate() {
        validate_target(s, i, f)?;
        validate_fields(s, i, f)?;
        validate_timing(s, i, f, bound_s)?;
    }
    if let Some(r) = &s.random {
        validate_random(s, r, bound_s)?;
    }
    if s.faults.is_empty() && bound_s > s.duration_s {
        return bad(
            "duration_s",
            format!("{} s cannot show a complete sync; the liveness bound is {bound_s} s", s.duration_s),
        );
    }
    Ok(())
}

/// A fault's target: a node of this scenario for the kinds that act on one, none for the rest.
fn validate_target(s: &Scenario, i: usize, f: &Fault) -> Result<(), (String, String)> {
    let bad = |field: &str, message: String| Err((field.to_owned(), message));
    let field = |k: &str| format!("faults[{i}].{k}");
    let node_fault = f.kind.needs_a_node();
    match (&f.target, node_fault) {
        (None, true) => {
            return bad(
                &field("target"),
                format!("{} needs a target: a node (n1..n{}) or owner / non-owner", f.kind, s.nodes.count),
            )
        }
        (Some(t), true) => {
            let known = t == "owner" || t == "non-owner" || node_index_ok(t, s.nodes.count).is_some();
            if !known {
                return bad(
                    &field("target"),
                    format!("`{t}` is not a node of this scenario (n1..n{}) nor owner / non-owner", s.nodes.count),
                );
            }
        }
        // A clock jump without a target moves the primary's clock; with one, that node's.
        (Some(t), false) if f.kind == FaultKind::ClockJump => {
            if t != "owner" && t != "non-owner" && node_index_ok(t, s.nodes.count).is_none() {
                return bad(
                    &field("target"),
                    format!("`{t}` is not a node of this scenario (n1..n{}) nor owner / non-owner", s.nodes.count),
                );
            }
        }
        (Some(_), false) => {
            return bad(&field("target"), format!("{} acts on the store or Redis and takes no target", f.kind))
        }
        (None, false) => {}
    }
    Ok(())
}

/// A fault's kind-specific fields: each only on the kinds that take it, every node it names real.
fn validate_fields(s: &Scenario, i: usize, f: &Fault) -> Result<(), (String, String)> {
    let bad = |field: &str, message: String| Err((field.to_owned(), message));
    let field = |k: &str| format!("faults[{i}].{k}");
    if f.kind == FaultKind::Partition && (f.link.is_none() || !matches!(f.mode, Some(Mode::Blackhole | Mode::Reset))) {
        return bad(
            &field(if f.link.is_none() { "link" } else { "mode" }),
            "a partition needs `link` (redis, store, both) and `mode` (blackhole, reset)".into(),
        );
    }
    if f.kind == FaultKind::Failover && !matches!(f.mode, Some(Mode::Pause | Mode::Isolate | Mode::Manual)) {
        return bad(
            &field("mode"),
            "a failover needs `mode`: pause (SIGSTOP the primary), isolate (cut it from replication) or manual \
             (SENTINEL FAILOVER)"
                .into(),
        );
    }
    if f.kind != FaultKind::Failover {
        let given = [
            ("follow_ms", f.follow_ms.is_some()),
            ("never_follow", f.never_follow.is_some()),
            ("follow_ms_by_node", f.follow_ms_by_node.is_some()),
        ];
        if let Some((name, _)) = given.iter().find(|(_, set)| *set) {
            return bad(&field(name), "only a failover takes follow_ms, follow_ms_by_node and never_follow".into());
        }
    }
    let by_node = f.follow_ms_by_node.iter().flat_map(|m| m.keys());
    for (name, n) in
        f.never_follow.iter().flatten().map(|n| ("never_follow", n)).chain(by_node.map(|n| ("follow_ms_by_node", n)))
    {
        if node_index_ok(n, s.nodes.count).is_none() {
            return bad(&field(name), format!("`{n}` is not a node of this scenario (n1..n{})", s.nodes.count));
        }
    }
    if s.nodes.follow_failovers && (f.follow_ms.is_some() || f.never_follow.is_some() || f.follow_ms_by_node.is_some())
    {
        return bad(
            &field("follow_ms"),
            "with [nodes] follow_failovers every node follows a failover at once: drop follow_ms, \
             follow_ms_by_node and never_follow"
                .into(),
        );
    }
    if let Some(n) =
        f.never_follow.iter().flatten().find(|n| f.follow_ms_by_node.as_ref().is_some_and(|m| m.contains_key(*n)))
    {
        return bad(
            &field("follow_ms_by_node"),
            format!("`{n}` is in never_follow too: a node either follows (after its delay) or never does"),
        );
    }
    if f.unreplicated_acquire.is_some() && !(f.kind == FaultKind::Failover && f.mode == Some(Mode::Isolate)) {
        return bad(
            &field("unreplicated_acquire"),
            "only a failover with mode = \"isolate\" can take an acquire on the cut primary".into(),
        );
    }
    if let Some(j) = f.jump_ms.filter(|j| *j == 0 || j.unsigned_abs() > JUMP_MS_MAX) {
        return bad(&field("jump_ms"), format!("{j} is not a jump of 1 to {JUMP_MS_MAX} ms, forward or back"));
    }
    if (f.kind == FaultKind::ClockJump) != f.jump_ms.is_some() {
        return bad(
            &field("jump_ms"),
            if f.kind == FaultKind::ClockJump {
                "clock_jump needs jump_ms (ms the clock moves; negative: back)".into()
            } else {
                format!("jump_ms belongs to clock_jump, not {}", f.kind)
            },
        );
    }
    if matches!(f.kind, FaultKind::SlowStore | FaultKind::SlowModel | FaultKind::SlowRedis) && f.latency_ms.is_none() {
        return bad(&field("latency_ms"), format!("{} needs latency_ms", f.kind));
    }
    if let Err((name, why)) = slow_redis_fields(f) {
        return bad(&field(name), why);
    }
    if f.command.is_some() && !matches!(f.kind, FaultKind::LoseReplies | FaultKind::SlowRedis) {
        return bad(&field("command"), format!("command belongs to lose_replies and slow_redis, not {}", f.kind));
    }
    if f.command.is_some() && matches!(f.direction, Some(Direction::Replies | Direction::Both)) {
        return bad(
            &field("direction"),
            "slow_redis aimed at commands (command) delays their requests: direction = \"requests\", or leave it out"
                .into(),
        );
    }
    if let (Some(c @ (Aimed::Acquire | Aimed::Release)), Some(Trigger::Checkpoint(n))) = (f.command, f.trigger()) {
        return bad(
            &field("on"),
            format!(
                "a checkpoint trigger holds the node at checkpoint {n} until the fault is verified, and this fault is \
                 verified by the node's next {}, which cannot come while it is held: trigger it on an event \
                 (on = \"acquired\") or at a time",
                c.as_str()
            ),
        );
    }
    Ok(())
}

/// Whether `f` could stand as the only `[[faults]]` entry of `s` (whose `duration_s` the caller
/// sets): every rule a scenario file's fault must meet. The simulation draws only such faults, so
/// that each of its findings can be exported and run on containers. The error is (field, message).
pub fn fault_fits(s: &Scenario, f: &Fault) -> Result<(), (String, String)> {
    let mut one = s.clone();
    one.faults = vec![f.clone()];
    one.random = None;
    one.sim = None;
    validate(&one)
}

/// A fault's duration, trigger and heal, which must leave the liveness bound inside the run.
fn validate_timing(s: &Scenario, i: usize, f: &Fault, bound_s: u64) -> Result<(), (String, String)> {
    let bad = |field: &str, message: String| Err((field.to_owned(), message));
    let field = |k: &str| format!("faults[{i}].{k}");
    match (f.kind, f.duration_s) {
        (FaultKind::KeyLoss, 0) => {}
        (FaultKind::KeyLoss, _) => {
            return bad(&field("duration_s"), "key_loss is instantaneous: set duration_s = 0".into())
        }
        (FaultKind::PauseWrites, 0 | 1) => {
            return bad(
                &field("duration_s"),
                "pause_writes needs at least 2 (its probe waits 1 s for a write to block)".into(),
            )
        }
        // Sentinel can take a long write pause for a dead primary and fail over on its own.
        (FaultKind::PauseWrites, d) if s.sentinel.down_after_ms < d * 1000 + SENTINEL_MARGIN_MS => {
            return bad(
                &field("duration_s"),
                format!(
                    "a write pause of {d} s may make Sentinel fail over on its own (down_after_ms is {}): set \
                     [sentinel] down_after_ms to at least {}",
                    s.sentinel.down_after_ms,
                    d * 1000 + SENTINEL_MARGIN_MS
                ),
            )
        }
        (FaultKind::RedisRestart, _) if s.sentinel.down_after_ms < RESTART_DOWN_AFTER_MS => {
            return bad(
                &field("kind"),
                format!(
                    "a restart may make Sentinel fail over on its own (down_after_ms is {}): set [sentinel] \
                     down_after_ms to at least {RESTART_DOWN_AFTER_MS}, or declare the failover you want",
                    s.sentinel.down_after_ms
                ),
            )
        }
        (_, 0) => return bad(&field("duration_s"), "must be at least 1".into()),
        _ => {}
    }
    if let Some(on) = &f.on {
        if f.trigger().is_none() {
            return bad(&field("on"), format!("`{on}` is not a trigger: one of {TRIGGER_NAMES}"));
        }
        if f.target.as_deref() == Some("non-owner") {
            return bad(
                &field("target"),
                "a triggered fault hits the node that triggered it: use `owner` or a node".into(),
            );
        }
        if f.trigger() == Some(Trigger::Observed(ObservedTrigger::RoleChanged)) && f.target.as_deref() == Some("owner")
        {
            return bad(
                &field("target"),
                "no node triggers `role_changed`: name a node, or use a fault on Redis or the store".into(),
            );
        }
    }
    // A triggered fault may fire up to one liveness bound after at_s.
    let wait_s = if f.on.is_some() { bound_s } else { 0 };
    let healed = f.at_s + wait_s + f.duration_s;
    if healed + bound_s > s.duration_s {
        return bad(
            &field("at_s"),
            format!("heals at {healed} s, but the liveness bound needs {bound_s} s more and the run lasts {} s: lengthen duration_s to at least {}", s.duration_s, healed + bound_s),
        );
    }
    Ok(())
}

/// The `[random]` table: how many faults, of which kinds, drawn when.
fn validate_random(s: &Scenario, r: &Random, bound_s: u64) -> Result<(), (String, String)> {
    let bad = |field: &str, message: String| Err((field.to_owned(), message));
    if r.faults == 0 || r.faults > 64 {
        return bad("random.faults", format!("{} is not between 1 and 64", r.faults));
    }
    if r.kinds.is_empty() {
        return bad("random.kinds", "name at least one fault kind to draw from".into());
    }
    if let Some(k) = r.kinds.iter().find(|k| !k.drawn_at_random()) {
        return bad("random.kinds", format!("{k} is not drawn at random (it needs its own mode and timings)"));
    }
    if r.max_duration_s == 0 || r.from_s + r.max_duration_s > r.until_s {
        return bad(
            "random.until_s",
            format!("from_s {} + max_duration_s {} must fit before until_s {}", r.from_s, r.max_duration_s, r.until_s),
        );
    }
    if r.until_s + bound_s > s.duration_s {
        return bad(
            "random.until_s",
            format!(
                "the liveness bound needs {bound_s} s after until_s {}: lengthen duration_s to at least {}",
                r.until_s,
                r.until_s + bound_s
            ),
        );
    }
    Ok(())
}

/// Shard `k` of `n` (1-based) of `files` as `discover` sorted them: every `n`th file, starting at
/// the `k`th, so that N runners given the same paths split them without overlap.
#[must_use]
pub fn shard(files: Vec<PathBuf>, k: usize, n: usize) -> Vec<PathBuf> {
    files.into_iter().enumerate().filter(|(i, _)| n > 0 && i % n == k.wrapping_sub(1)).map(|(_, f)| f).collect()
}

/// The most directories one discovery walks: a tree larger than this is no scenario collection.
const DIRS_MAX: usize = 10_000;

/// Every scenario file under `paths` (files, or directories searched recursively), sorted, each
/// file once: a directory reached twice (a link back up, a loop) is walked once, and a file
/// reached by two paths is listed by the first.
pub fn discover(paths: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut seen_dirs = std::collections::HashSet::new();
    let mut seen_files = std::collections::HashSet::new();
    let mut file = |path: PathBuf, out: &mut Vec<PathBuf>| {
        if seen_files.insert(std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone())) {
            out.push(path);
        }
    };
    for p in paths {
        if !p.is_dir() {
            file(p.clone(), &mut out);
            continue;
        }
        let mut stack = vec![p.clone()];
        // Bounded: each directory is walked once, and at most DIRS_MAX of them.
        while let Some(dir) = stack.pop() {
            let real = std::fs::canonicalize(&dir).unwrap_or_else(|_| dir.clone());
            if !seen_dirs.insert(real) || seen_dirs.len() > DIRS_MAX {
                continue;
            }
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "toml") {
                    file(path, &mut out);
                }
            }
        }
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests;
