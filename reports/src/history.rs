//! The vocabulary of a run, defined once and shared by the nodes, the supervisor, the vector
//! store, the recorder and the checker: node-protocol messages (commands to a node, events from
//! it) and the store's audit records. Everything here is plain serde data, versioned by
//! [`PROTOCOL_VERSION`]; docs/node-protocol.md is the language-neutral description.

use serde::{Deserialize, Serialize};

/// The node protocol's current version. A node announces the version it speaks in `hello`; the
/// supervisor accepts this one and the previous ([`PROTOCOL_VERSION_MIN`]) and refuses others.
pub const PROTOCOL_VERSION: u32 = 4;

/// The oldest protocol version the harness still speaks: a node written for it keeps working
/// (its events carry no decision or send stamps, so `within_validity` is not applicable to it).
pub const PROTOCOL_VERSION_MIN: u32 = 1;

/// Whether the harness speaks protocol `version`.
#[must_use]
pub fn protocol_supported(version: u32) -> bool {
    (PROTOCOL_VERSION_MIN..=PROTOCOL_VERSION).contains(&version)
}

/// The seven checkpoints of the tenant sync pipeline: number and name.
pub const CHECKPOINTS: [(u8, &str); 7] = [
    (1, "after-prepare"),
    (2, "between-batches"),
    (3, "before-create"),
    (4, "after-create"),
    (5, "before-switch"),
    (6, "after-switch"),
    (7, "before-persist"),
];

/// The name of checkpoint `n` (1..=7).
#[must_use]
pub fn checkpoint_name(n: u8) -> &'static str {
    CHECKPOINTS.iter().find(|(k, _)| *k == n).map_or("unknown", |(_, name)| name)
}

/// Where fences come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FenceSource {
    /// The lease's Redis counter (`INCR` on acquire).
    Redis,
    /// The store itself: one `begin_epoch` per acquisition, issued atomically by the store.
    Store,
}

/// What the store does with a write under an old fence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StorePolicy {
    /// Reject a fence older than the newest seen for the tenant, and a second owner presenting
    /// the newest fence.
    Enforce,
    /// Accept everything (shows what an unfenced store suffers).
    Observe,
    /// Self-test only: `enforce` with a bug, the persist is never checked, so a stale persist
    /// lands. Proves the fencing checks fail on a store that fences all but one operation.
    FlawedSkipsPersist,
}

/// Lease durations sent to a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeaseTimings {
    /// Lease ttl.
    pub ttl_ms: u64,
    /// Renewal interval.
    pub renew_ms: u64,
    /// Acquire wait.
    pub acquire_wait_ms: u64,
    /// Timeout of every Redis command.
    pub command_timeout_ms: u64,
}

/// The shape of one sync round.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineShape {
    /// Embedding batches per round.
    pub batches: u32,
    /// Points per batch.
    pub batch_size: u32,
    /// Wall time of one model (embedding) call.
    pub embed_ms: u64,
    /// Wall time of preparing the round's input.
    pub prepare_ms: u64,
    /// Which checkpoints run `ensure_owned` (all seven in production).
    pub checkpoints: Vec<u8>,
    /// Checkpoints at which the node stops and waits for the harness's `go`.
    pub sync_points: Vec<u8>,
    /// Pause between rounds.
    pub pause_ms: u64,
    /// Timeout of one store call (past it the outcome is unknown).
    pub store_timeout_ms: u64,
}

/// The node's configuration: the first line a node reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeConfig {
    /// The oldest protocol version the harness accepts ([`PROTOCOL_VERSION_MIN`]): a node written
    /// for it sees the value it expects. The node answers `hello` with the version it speaks.
    pub protocol: u32,
    /// The newest protocol version the harness speaks ([`PROTOCOL_VERSION`]); absent in version 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol_max: Option<u32>,
    /// Node id (`n1`, ...).
    pub node: String,
    /// Bumped on every restart of the node; part of every owner token.
    pub incarnation: u64,
    /// The tenant whose lease the nodes contend for.
    pub tenant: String,
    /// Redis URL (may carry a password: a node never logs it).
    pub redis_url: String,
    /// The vector store's address (`host:port`).
    pub store_addr: String,
    /// The embedding model service's address (`host:port`, protocol 4): a node of version 4 makes
    /// each model call a `POST /v1/embed` there. Absent: the node makes its model calls itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_addr: Option<String>,
    /// Lease durations.
    pub lease: LeaseTimings,
    /// Round shape.
    pub pipeline: PipelineShape,
    /// Where fences come from.
    pub fence_source: FenceSource,
    /// Seed for the node's own jitter (derived from the run's seed).
    pub seed: u64,
}

/// A line the harness sends a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum NodeCommand {
    /// The first line: who the node is and what it runs.
    Config(Box<NodeConfig>),
    /// Begin the round loop.
    Start,
    /// Finish: release if holding, say `stopped`, exit.
    Stop,
    /// Leave the sync point at `checkpoint`.
    Go {
        /// The checkpoint the node waits at.
        checkpoint: u8,
    },
    /// Block the renewal thread (only) for `ms`.
    StallRenewal {
        /// How long.
        ms: u64,
    },
    /// Make every model call `ms` slower from now on (0 restores the normal speed).
    SlowModel {
        /// Extra time per model call.
        ms: u64,
    },
}

/// A store operation, as a node names it and as the audit log records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StoreOp {
    /// Ask the store for this acquisition's fence (store-issued fences only).
    BeginEpoch,
    /// Create a temporary collection.
    CreateCollection,
    /// Write a batch of points.
    Upsert,
    /// Point the tenant's live alias at a collection.
    SwitchAlias,
    /// Write the tenant's sync record.
    PersistRecord,
    /// Drop a collection.
    DropCollection,
}

impl StoreOp {
    /// Every op, in the pipeline's order (docs/node-protocol.md lists each by its wire name).
    pub const ALL: [StoreOp; 6] = [
        StoreOp::BeginEpoch,
        StoreOp::CreateCollection,
        StoreOp::Upsert,
        StoreOp::SwitchAlias,
        StoreOp::PersistRecord,
        StoreOp::DropCollection,
    ];

    /// Its name in the history and the node protocol (`persist_record`).
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            StoreOp::BeginEpoch => "begin_epoch",
            StoreOp::CreateCollection => "create_collection",
            StoreOp::Upsert => "upsert",
            StoreOp::SwitchAlias => "switch_alias",
            StoreOp::PersistRecord => "persist_record",
            StoreOp::DropCollection => "drop_collection",
        }
    }

    /// Whether the op changes the store (everything but `BeginEpoch`, which only issues a fence).
    #[must_use]
    pub fn is_write(self) -> bool {
        self != StoreOp::BeginEpoch
    }
}

/// The Redis key holding a tenant's lease: the owner's token, written by `SET NX PX`. The harness
/// reads it (the observer's GET and PTTL, the stall probe), deletes it (`key_loss`) and follows a
/// stalled or slowed node by the token in it.
#[must_use]
pub fn lease_key(tenant: &str) -> String {
    format!("leasequake:{{{tenant}}}:lease")
}

/// The Redis key of a tenant's fence counter (`INCR` on acquire, `fence_source = "redis"`); the
/// node's alone: the harness never reads it (a restart without persistence empties it).
#[must_use]
pub fn fence_key(tenant: &str) -> String {
    format!("leasequake:{{{tenant}}}:fence")
}

/// Whether a node sees and reports its lease's renewals (`hello`, protocol 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Renewals {
    /// Every renewal is reported (`renewed`): the default.
    Reported,
    /// The lock library renews on a thread of its own, out of the node's sight: no `renewed`
    /// events, and the properties that read them are not applicable to the node.
    Hidden,
}

/// The longest owner token the harness accepts, in bytes.
pub const TOKEN_MAX_BYTES: usize = 256;

/// Why `token` is no owner token of node `node` speaking `protocol`, or `None`. A token is at most
/// [`TOKEN_MAX_BYTES`] bytes, has no whitespace or control characters, and is never reused (not
/// checked here). Under protocols 1 and 2 it also starts with the node's name and a slash: the
/// harness told whose key it is by that prefix alone. Under 3 any value the node's lock writes is
/// a token: the harness learns whose it is from the node's `acquired`.
#[must_use]
pub fn token_problem(node: &str, token: &str, protocol: u32) -> Option<String> {
    if token.is_empty() {
        return Some("an empty token".into());
    }
    if token.len() > TOKEN_MAX_BYTES {
        return Some(format!("a token of {} bytes (at most {TOKEN_MAX_BYTES})", token.len()));
    }
    if token.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Some("a token with whitespace or control characters".into());
    }
    match token.strip_prefix(node).and_then(|rest| rest.strip_prefix('/')) {
        Some(_) => None,
        None if protocol >= 3 => None,
        None => Some(format!(
            "token {token:?} does not start with the node's name and a slash (`{node}/`): under protocol {protocol} \
             the harness tells whose lease key it is by that prefix (docs/node-protocol.md, Redis keys and tokens; \
             protocol 3 lifts the rule)"
        )),
    }
}

/// What a node reports. Every event carries the node's CLOCK_MONOTONIC reading in ns (`mono_ns`,
/// 0 where the language offers none) and its round number.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeEvent {
    /// The node's monotonic clock, ns.
    pub mono_ns: u64,
    /// Round number, from 1; 0 before the first round.
    pub round: u64,
    /// What happened.
    #[serde(flatten)]
    pub kind: EventKind,
}

/// The events of the node protocol.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum EventKind {
    /// The node read its configuration and speaks `protocol`.
    Hello {
        /// Protocol version.
        protocol: u32,
        /// Free text naming the implementation.
        implementation: String,
        /// The Redis key the node keeps its lease under, when not [`lease_key`] (protocol 3: a lock
        /// library picks its own key). Every node of a run must declare the same one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        lease_key: Option<String>,
        /// Whether the node reports its renewals (protocol 3; absent: it does).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        renewals: Option<Renewals>,
    },
    /// An acquire began.
    AcquireAttempt,
    /// The lease is ours.
    Acquired {
        /// Owner token.
        token: String,
        /// The fence this acquisition's writes carry.
        fence: u64,
        /// When the winning acquire was sent, on the node's monotonic clock (protocol 2): the
        /// acquisition's validity counts from here.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sent_ns: Option<u64>,
    },
    /// The acquire wait ran out.
    AcquireTimedOut {
        /// The reason.
        reason: String,
    },
    /// A renewal extended the lease.
    Renewed {
        /// Owner token.
        token: String,
        /// When this renewal was sent, on the node's monotonic clock (protocol 2).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sent_ns: Option<u64>,
    },
    /// Ownership is lost (sticky).
    OwnershipLost {
        /// Owner token.
        token: String,
        /// Why (`held_by_other`, `renewal_failed`, `expired`, ...).
        reason: String,
        /// The checkpoint that saw it, if one did.
        checkpoint: Option<u8>,
    },
    /// `ensure_owned` passed.
    CheckpointPassed {
        /// Owner token.
        token: String,
        /// 1..=7.
        number: u8,
        /// When the node read its clock to decide that it still owned the lease (protocol 2).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        decided_ns: Option<u64>,
    },
    /// `ensure_owned` failed; the round is cancelled.
    CheckpointFailed {
        /// Owner token.
        token: String,
        /// 1..=7.
        number: u8,
        /// Why.
        reason: String,
    },
    /// The node is about to leave checkpoint `number` and waits for `go`.
    SyncPoint {
        /// Owner token.
        token: String,
        /// 1..=7.
        number: u8,
    },
    /// A model (embedding) call finished.
    ModelCall {
        /// Owner token.
        token: String,
        /// Batch index.
        batch: u32,
        /// Wall time.
        ms: u64,
        /// When the node read its clock to decide to start the call (protocol 2).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        decided_ns: Option<u64>,
    },
    /// A store call was sent.
    StoreCallSent {
        /// Owner token.
        token: String,
        /// Fence carried.
        fence: u64,
        /// Operation.
        op: StoreOp,
        /// The node's id for the call (unique per node incarnation).
        call: u64,
        /// When the node read its clock to decide to send the call (protocol 2).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        decided_ns: Option<u64>,
    },
    /// The store accepted it.
    StoreCallAcked {
        /// Owner token.
        token: String,
        /// Call id.
        call: u64,
    },
    /// The store rejected it (fencing, or a bad request).
    StoreCallRejected {
        /// Owner token.
        token: String,
        /// Call id.
        call: u64,
        /// The store's reason.
        reason: String,
    },
    /// No answer: it may or may not have landed.
    StoreCallUnknown {
        /// Owner token.
        token: String,
        /// Call id.
        call: u64,
        /// What happened.
        detail: String,
    },
    /// The round was cancelled.
    RoundAborted {
        /// Owner token.
        token: String,
        /// Whether ownership loss caused it (else another failure).
        lost: bool,
        /// Why.
        reason: String,
    },
    /// A round completed: the alias points at its collection and the record is persisted.
    SyncFinished {
        /// Owner token.
        token: String,
        /// Fence.
        fence: u64,
        /// The collection now live.
        collection: String,
    },
    /// The lease was released.
    Released {
        /// Owner token.
        token: String,
        /// `deleted`, `not_owner`, `already_released`, or the error.
        outcome: String,
    },
    /// The node stopped on `stop` (or stdin closed) and exits.
    Stopped,
    /// A node-level failure that is not a protocol event (cannot reach Redis, say).
    Error {
        /// What.
        message: String,
    },
}

/// One line of the store's audit log: every request, accepted or rejected, in arrival order.
impl EventKind {
    /// The acquisition's token, for the events that carry one.
    #[must_use]
    pub fn token(&self) -> Option<&str> {
        match self {
            EventKind::Acquired { token, .. }
            | EventKind::Renewed { token, .. }
            | EventKind::OwnershipLost { token, .. }
            | EventKind::CheckpointPassed { token, .. }
            | EventKind::CheckpointFailed { token, .. }
            | EventKind::SyncPoint { token, .. }
            | EventKind::ModelCall { token, .. }
            | EventKind::StoreCallSent { token, .. }
            | EventKind::StoreCallAcked { token, .. }
            | EventKind::StoreCallRejected { token, .. }
            | EventKind::StoreCallUnknown { token, .. }
            | EventKind::RoundAborted { token, .. }
            | EventKind::SyncFinished { token, .. }
            | EventKind::Released { token, .. } => Some(token),
            EventKind::Hello { .. }
            | EventKind::AcquireAttempt
            | EventKind::AcquireTimedOut { .. }
            | EventKind::Stopped
            | EventKind::Error { .. } => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditRecord {
    /// Arrival sequence, from 1, gap-free: the one order the checker trusts.
    pub seq: u64,
    /// The store's CLOCK_MONOTONIC at arrival, ns.
    pub mono_ns: u64,
    /// Tenant.
    pub tenant: String,
    /// Node id.
    pub node: String,
    /// Owner token.
    pub token: String,
    /// Fence presented (for `begin_epoch`: the fence issued).
    pub fence: u64,
    /// Operation.
    pub op: StoreOp,
    /// The collection concerned, if any.
    pub collection: Option<String>,
    /// Whether it was applied.
    pub accepted: bool,
    /// Why it was rejected.
    pub reason: Option<String>,
    /// For `switch_alias`: the alias version after the switch.
    pub alias_version: Option<u64>,
    /// The node's call id, to join with its events.
    pub call: u64,
}

/// One call the embedding model service answered (history version 7): its audit log, in arrival
/// order, the ground truth of what model calls were made whatever a node reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelRecord {
    /// Arrival sequence, from 1, gap-free.
    pub seq: u64,
    /// CLOCK_MONOTONIC at arrival, ns.
    pub arrived_ns: u64,
    /// CLOCK_MONOTONIC when it answered, ns; absent when the caller went away first (a call the
    /// node's loss cancelled, a node killed mid-call).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_ns: Option<u64>,
    /// Tenant.
    pub tenant: String,
    /// The node the call says it came from.
    pub node: String,
    /// The owner token it carried.
    pub token: String,
    /// The fence it carried.
    pub fence: u64,
    /// The batch it embeds.
    pub batch: u64,
    /// How long the model works on it, ms (the pipeline's `embed_ms`).
    pub ms: u64,
}

/// The history file's format version (docs/history.md). Version 7 adds what the fault proxy
/// witnessed on every node link ([`HistoryLine::Wire`], `header.witness`, `snapshot.witness_gaps`);
/// version 6 says on a heal how long the
/// fault's effect may outlast it ([`FaultEvent::outlasts_ms`]); version 5 records a heal that failed as
/// such ([`FaultPhase::HealFailed`]); version 4 adds the environment's events
/// ([`EnvEvent`]); version 3 seals the history (the snapshot's [`Seal`]); version 2 added the
/// header's `ttl_ms`.
pub const HISTORY_VERSION: u32 = 7;

/// The oldest history version `check` and `repro` still read (judged by the rules it supports).
pub const HISTORY_VERSION_MIN: u32 = 2;

/// What a scenario expects to fail on purpose (a known-unsafe configuration shown).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectedFailure {
    /// The property expected to be violated (`no_stale_write`, ...).
    pub property: String,
    /// Why it is expected, in a sentence a reader of the report understands.
    pub why: String,
    /// Properties the same hazard may violate as well (they do not fail the run).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also: Vec<String>,
}

/// The first line of a history: what ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Header {
    /// [`HISTORY_VERSION`].
    pub version: u32,
    /// Unique id of the run.
    pub run_id: String,
    /// Scenario name.
    pub scenario: String,
    /// The seed that shaped the run.
    pub seed: u64,
    /// The tenant.
    pub tenant: String,
    /// Store policy.
    pub policy: StorePolicy,
    /// Fence source.
    pub fence_source: FenceSource,
    /// A declared expected failure, if any.
    pub expected: Option<ExpectedFailure>,
    /// After the last fault heals, a complete sync must land within this bound.
    pub liveness_bound_ms: u64,
    /// A node silent longer than this, outside a fault declared on it, is a hole in the history.
    pub node_silence_ms: u64,
    /// An observer gap longer than this, outside a fault declared on that instance, is a hole.
    pub observer_gap_ms: u64,
    /// CLOCK_MONOTONIC at the start, ns.
    pub started_ns: u64,
    /// The store's audit sequence number before the run (0 for a fresh store): a run attached to
    /// a running environment judges only the records after it, which must follow it gap-free.
    #[serde(default)]
    pub audit_after: u64,
    /// The lease's renewal interval, ms (`keeps_renewing`; inferred from the renewals when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renew_ms: Option<u64>,
    /// The lease's ttl, ms (`within_validity`; version 2, absent in version 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    /// The scenario's waste budget (`bounded_waste`), if it declares one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waste_budget_ms: Option<u64>,
    /// The nodes' command, when it was not the harness's own node (`--node-cmd`, the scenario's
    /// `[nodes] command`, the self-test's flawed build): what `leasequake repro` starts again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_command: Option<Vec<String>>,
    /// The nodes followed any failover as Sentinel-aware clients do (`[nodes] follow_failovers`):
    /// a role change no fault declared is then judged, not drift (version 3).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub clients_follow: bool,
    /// The round the liveness bound counts twice, as the scenario estimates it (version 4): the
    /// checker lengthens the bound by twice what this run's slowest fault-free round took more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round_estimate_ms: Option<u64>,
    /// The model service's audit sequence number before the run (version 7; 0 for a fresh one):
    /// its `model` lines follow it without a gap.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub model_after: u64,
    /// The fault proxy witnessed every node link (version 7): its records are `wire` lines, and
    /// the wire properties judge them. Absent: no witness (the official Toxiproxy image, or an
    /// older history), and the wire properties are not applicable.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub witness: bool,
}

/// The faults of this version of the runner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// Cut a node from Redis, the store, or both (`link`), by blackhole or reset (`mode`).
    Partition,
    /// SIGSTOP a node (renewal freezes too), SIGCONT after `duration_s`.
    Pause,
    /// Stall the node's renewal thread only.
    StallRenewal,
    /// SIGKILL a node; restart it (new incarnation) after `duration_s`.
    Crash,
    /// Latency on the store's responses (`latency_ms`).
    SlowStore,
    /// Reset the store's connections.
    FailingStore,
    /// Slow model calls (`latency_ms` more per call).
    SlowModel,
    /// Sentinel failover of the Redis primary: `mode = "pause"` (SIGSTOP) or `"isolate"`
    /// (cut from the replication network; clients still reach it: the split-brain window). Node
    /// proxies follow the new primary after `follow_ms`, except the `never_follow` nodes.
    Failover,
    /// Kill the Redis primary (SIGKILL) and start it again: no persistence, so the lease key and
    /// the fence counter are gone (the replica resyncs from the empty primary).
    RedisRestart,
    /// Delete the lease key on the primary (an operator's `DEL`/`FLUSHALL`, an eviction): the
    /// holder does not know until its next check or renewal. Instantaneous (`duration_s` 0).
    KeyLoss,
    /// `CLIENT PAUSE WRITE` on the primary for `duration_s` (what a Redis failover does while it
    /// hands over): writes and scripts block, reads still answer.
    PauseWrites,
    /// Move the primary's wall clock by `jump_ms` (forward: positive; back: negative) for
    /// `duration_s`; Redis expires keys on it. Healing moves it back (the opposite jump).
    ClockJump,
    /// Latency (`latency_ms`, ± `jitter_ms`) on one node's link to Redis, on its replies
    /// (`direction = "replies"`, the default), its requests, or both: a slow reply shortens the
    /// node's validity, it must not extend it.
    SlowRedis,
    /// Ambiguous replies on one node's link to Redis: every command the node sends reaches Redis
    /// and runs, its reply never comes, and each connection is cut 100 ms after the fault reaches
    /// it (a reconnect lives 100 ms too). Aimed with a trigger (`on = "renewed"`: the next renewal;
    /// `on = "released"`: the next acquire).
    LoseReplies,
}

impl FaultKind {
    /// Every kind, in the vocabulary's order (a coverage table's rows).
    pub const ALL: [FaultKind; 14] = [
        FaultKind::Partition,
        FaultKind::Pause,
        FaultKind::StallRenewal,
        FaultKind::Crash,
        FaultKind::SlowStore,
        FaultKind::FailingStore,
        FaultKind::SlowModel,
        FaultKind::Failover,
        FaultKind::RedisRestart,
        FaultKind::KeyLoss,
        FaultKind::PauseWrites,
        FaultKind::ClockJump,
        FaultKind::SlowRedis,
        FaultKind::LoseReplies,
    ];

    /// Whether it can hold a renewal in flight, and whose: a renewal the fault delays is no
    /// failure to renew (`keeps_renewing`). A partition's is its target's unless its probe saw the
    /// Redis link reset (a renewal then fails at once): the checker reads that from the
    /// verification's [`LinkCut`].
    #[must_use]
    pub fn holds_renewal(self) -> Holds {
        match self {
            Self::Pause | Self::StallRenewal | Self::SlowRedis | Self::Partition => Holds::Target,
            Self::Failover | Self::RedisRestart | Self::PauseWrites => Holds::Everyone,
            Self::Crash
            | Self::SlowStore
            | Self::FailingStore
            | Self::SlowModel
            | Self::KeyLoss
            | Self::ClockJump
            | Self::LoseReplies => Holds::Nobody,
        }
    }

    /// Stops or kills a node's process, or holds its renewal thread: two of these at once on one
    /// node cannot both take effect.
    #[must_use]
    pub fn stops_a_process(self) -> bool {
        matches!(self, Self::Crash | Self::Pause | Self::StallRenewal)
    }

    /// Acts on Redis itself (the primary, or Sentinel's failover), not on a node or the store. A
    /// `clock_jump` with a node target moves that node's clock instead.
    #[must_use]
    pub fn acts_on_redis(self) -> bool {
        matches!(self, Self::Failover | Self::RedisRestart | Self::KeyLoss | Self::PauseWrites | Self::ClockJump)
    }

    /// Needs a node target (a node, `owner` or `non-owner`): it acts on one node or its links.
    #[must_use]
    pub fn needs_a_node(self) -> bool {
        !self.acts_on_redis() && !self.store_wide()
    }

    /// May be drawn at random (`[random] kinds`): kinds that need their own mode and timings
    /// (every Redis-level fault, a slowed Redis link) are declared, never drawn.
    #[must_use]
    pub fn drawn_at_random(self) -> bool {
        !self.acts_on_redis() && self != Self::SlowRedis
    }

    /// Acts on the store as a whole (every node's store link): two at once cannot be told apart.
    #[must_use]
    pub fn store_wide(self) -> bool {
        matches!(self, Self::SlowStore | Self::FailingStore)
    }

    /// Changes which Redis instance is master (the observer sees roles change).
    #[must_use]
    pub fn changes_roles(self) -> bool {
        self == Self::Failover
    }

    /// Stops and starts the redis-primary container (Docker's `die` and `start` for it).
    #[must_use]
    pub fn restarts_the_primary_container(self) -> bool {
        self == Self::RedisRestart
    }

    /// The name a scenario file uses (and the history records).
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Partition => "partition",
            Self::Pause => "pause",
            Self::StallRenewal => "stall_renewal",
            Self::Crash => "crash",
            Self::SlowStore => "slow_store",
            Self::FailingStore => "failing_store",
            Self::SlowModel => "slow_model",
            Self::Failover => "failover",
            Self::RedisRestart => "redis_restart",
            Self::KeyLoss => "key_loss",
            Self::PauseWrites => "pause_writes",
            Self::ClockJump => "clock_jump",
            Self::SlowRedis => "slow_redis",
            Self::LoseReplies => "lose_replies",
        }
    }
}

impl std::fmt::Display for StoreOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::fmt::Display for FaultKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Whose renewal a fault can hold in flight ([`FaultKind::holds_renewal`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holds {
    /// The node it targets.
    Target,
    /// Every node (the fault is on Redis itself).
    Everyone,
    /// No one.
    Nobody,
}

/// How a partition's probe found a node's Redis link (version 4): silent (a blackhole holds a
/// command in flight) or reset (a command fails at once).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LinkCut {
    /// The probe got no answer: commands hang until the link heals.
    Silent,
    /// The probe's connection was reset, closed or refused: commands fail at once.
    Reset,
}

/// A fault's life: requested, verified in effect by an independent probe, healed; or failed (not
/// applied or not verified), or not healed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultPhase {
    /// The injector asked for it.
    Requested,
    /// An independent probe saw it in effect.
    Verified,
    /// It was undone.
    Healed,
    /// It could not be applied or verified (the run is inconclusive).
    Failed,
    /// Undoing it failed: it may have stayed in effect to the end (the run is inconclusive;
    /// version 5).
    HealFailed,
}

/// One step of one fault.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultEvent {
    /// Fault id, unique in the run.
    pub id: u64,
    /// Kind.
    pub fault: FaultKind,
    /// What it targets: a node id (`n1`) or an instance (`redis-primary`).
    pub target: String,
    /// Which step.
    pub phase: FaultPhase,
    /// CLOCK_MONOTONIC, ns.
    pub at_ns: u64,
    /// Free text (the probe's finding, the failure's cause).
    pub detail: String,
    /// On a partition's `verified` line that cut a node's Redis link: how the probe found it
    /// (version 4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redis_link: Option<LinkCut>,
    /// On a `healed` line (version 6): how long the fault's effect may outlast its heal, ms. A
    /// forward step of Redis's clock: a key written during it carries an expiry the step later,
    /// so a stopped holder's lease can outlive the heal by the step. Liveness counts from then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outlasts_ms: Option<u64>,
}

/// What the observer saw of the lease key on one Redis instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObserverSample {
    /// The instance (`redis-primary`, `redis-replica`).
    pub instance: String,
    /// CLOCK_MONOTONIC, ns.
    pub at_ns: u64,
    /// The owner token in the key, if any.
    pub holder: Option<String>,
    /// The key's remaining ttl, ms.
    pub ttl_ms: Option<i64>,
    /// The instance's role (`master`, `slave`).
    pub role: Option<String>,
    /// Why the instance could not be read, if it could not.
    pub error: Option<String>,
    /// CLOCK_MONOTONIC when the sample was asked for, ns (version 7): the instance was read
    /// between this and `at_ns` (an exec on a loaded machine takes its time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asked_ns: Option<u64>,
}

/// What changed in the environment while the run ran, by the watcher that saw it (version 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EnvChange {
    /// A container stopped running (Docker's `die`).
    ContainerDied,
    /// A container started (Docker's `start`).
    ContainerStarted,
    /// A container was frozen or thawed (Docker's `pause`, `unpause`), or ran out of memory (`oom`).
    ContainerOther,
    /// A Sentinel announced a new master (`+switch-master`).
    SwitchMaster,
    /// Any other Sentinel announcement (`+sdown`, `+odown`, `-sdown`, `+try-failover`, ...): shown,
    /// never drift on its own.
    Sentinel,
    /// A proxy of the nodes' links went missing from the proxy server, or was disabled.
    ProxyChanged,
    /// The proxy server's API did not answer three polls in a row.
    ProxyUnreachable,
    /// The host's wall clock stepped (version 7): Redis expires keys on it, so every lease's
    /// expiry in Redis moved by the step while the nodes' monotonic deadlines did not.
    ClockStepped,
}

/// One change the environment's watchers saw: Docker's events, the Sentinels' announcements, the
/// proxy server's list of proxies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvEvent {
    /// What changed.
    pub change: EnvChange,
    /// What it happened to: a container's role (`redis-primary`, `sentinel-2`, `proxy`), a proxy
    /// (`n1-redis`).
    pub subject: String,
    /// Who saw it: `docker`, `sentinel-1`, `proxy-api`.
    pub source: String,
    /// CLOCK_MONOTONIC, ns: when it happened (Docker's own time) or was seen (the others).
    pub at_ns: u64,
    /// The watcher's words (the Sentinel's announcement, the exit code).
    pub detail: String,
}

/// The runner's last line: what was left when the run ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Snapshot {
    /// CLOCK_MONOTONIC at the end, ns.
    pub ended_ns: u64,
    /// Faults still applied (ids).
    pub faults_still_applied: Vec<u64>,
    /// Non-live collections left in the store.
    pub temporary_collections_left: Vec<String>,
    /// Versions of what ran (redis, docker, harness commit, ...).
    pub versions: std::collections::BTreeMap<String, String>,
    /// How far the run went past its `duration_s`, ms: the last fault healed so late that the
    /// liveness bound after it fell beyond the planned end. Absent when it ended as planned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extended_ms: Option<u64>,
    /// Links whose witness records are not all in the history (version 7): the proxy dropped
    /// some for room, or could not be read. The wire properties of those nodes are inconclusive.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub witness_gaps: Vec<String>,
    /// Why the run was stopped before its end (Ctrl-C, SIGTERM, a suite's time limit), when it
    /// was: the history holds what was seen, and no verdict stands on it but a failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
    /// What a reader needs to know the history is whole (version 3; absent before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seal: Option<Seal>,
}

/// The closing snapshot's account of the lines before it (docs/history.md, Integrity): a line
/// lost, added, moved or changed after the run is noticed, and the verdict is inconclusive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Seal {
    /// The store's last audit sequence number the run recorded (`audit_after` when none): a
    /// record cut from the end is missed by a gap check alone.
    pub audit_last_seq: u64,
    /// How many lines of each kind precede the snapshot.
    pub lines: LineCounts,
    /// SHA-256, lowercase hex, of every line as this version writes it (its JSON, then `\n`),
    /// the snapshot included with this field empty: whitespace and line endings do not count,
    /// content and order do.
    pub digest: String,
}

/// Lines of each kind between the header and the snapshot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LineCounts {
    /// Node events.
    pub node: u64,
    /// Node lines that were not protocol events.
    pub garbage: u64,
    /// Store audit records.
    pub audit: u64,
    /// Fault steps.
    pub fault: u64,
    /// Observer samples.
    pub observer: u64,
    /// Environment events (version 4; absent when none, so a version 3 seal reads as written).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub environment: u64,
    /// Witness records (version 7; absent when none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub wire: u64,
    /// Model service audit records (version 7; absent when none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub model: u64,
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference
fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One line of a history file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum HistoryLine {
    /// First line.
    Header(Header),
    /// A node's event, with the harness's receipt stamp.
    Node {
        /// Node id.
        node: String,
        /// The node's incarnation.
        incarnation: u64,
        /// CLOCK_MONOTONIC at receipt, ns.
        received_ns: u64,
        /// The event as the node sent it.
        event: NodeEvent,
    },
    /// A node line that was not a protocol event.
    Garbage {
        /// Node id.
        node: String,
        /// CLOCK_MONOTONIC at receipt, ns.
        received_ns: u64,
        /// The line (cut).
        raw: String,
        /// Why it was refused.
        why: String,
    },
    /// One store audit record.
    Audit(AuditRecord),
    /// One fault step.
    Fault(FaultEvent),
    /// One observer sample.
    Observer(ObserverSample),
    /// One change in the environment (version 4).
    Environment(EnvEvent),
    /// One request a node sent through its proxy, with its reply, as the proxy witnessed it
    /// (version 7).
    Wire(crate::wire::WireRecord),
    /// One call the model service answered (version 7).
    Model(ModelRecord),
    /// Last line.
    Snapshot(Snapshot),
}
