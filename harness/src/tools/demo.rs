//! The demo: node processes (the reference node, or any `--node-cmd`) contend for one tenant's
//! lease on a real Redis and write to a real vector store for a while; then every store call a
//! node saw acknowledged is looked up in the store's audit log. No faults and no checker: it shows
//! the parts working together, and its accounting is the first thing the checker will build on.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use leasequake_reports::history::{
    AuditRecord, EventKind, FenceSource, LeaseTimings, NodeCommand, NodeConfig, PipelineShape, StoreOp, StorePolicy,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::error::HarnessError;
use crate::store::{self, Store};
use crate::supervisor::{NodeProcess, Received};

/// What the demo runs.
#[derive(Debug, Clone)]
pub struct DemoConfig {
    /// Redis to use.
    pub redis_url: String,
    /// The node command (program and arguments).
    pub node_cmd: Vec<String>,
    /// How many nodes contend.
    pub nodes: u32,
    /// The tenant.
    pub tenant: String,
    /// Lease ttl; the other durations keep the production ratios.
    pub ttl: Duration,
    /// How long to run.
    pub duration: Duration,
    /// Store fencing policy.
    pub policy: StorePolicy,
    /// Where fences come from.
    pub fence_source: FenceSource,
}

/// What each node did, and what the audit log says.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Tally {
    /// Per node: syncs finished.
    pub syncs: BTreeMap<String, u64>,
    /// Per node: rounds aborted by ownership loss.
    pub lost_rounds: BTreeMap<String, u64>,
    /// Per node: rounds aborted by anything else.
    pub other_aborts: BTreeMap<String, u64>,
    /// Audit records (every store request).
    pub audit_records: usize,
    /// Store calls the nodes saw acknowledged.
    pub acked: usize,
    /// Acknowledged calls missing from the audit log (must be empty).
    pub unaccounted: Vec<(String, u64)>,
    /// Lines from nodes that were not protocol events (must be 0).
    pub garbage: usize,
    /// Fences of the accepted alias switches, in arrival order (must rise).
    pub alias_fences: Vec<u64>,
    /// The nodes that sent any line.
    pub spoke: std::collections::BTreeSet<String>,
}

impl Tally {
    /// Counts `history` against `audit`.
    #[must_use]
    pub fn of(history: &[Received], audit: &[AuditRecord]) -> Self {
        let mut t = Tally { audit_records: audit.len(), ..Tally::default() };
        for r in history {
            t.spoke.insert(r.node.clone());
            let Ok(e) = &r.line else {
                t.garbage += 1;
                continue;
            };
            let bump = |m: &mut BTreeMap<String, u64>| *m.entry(r.node.clone()).or_default() += 1;
            match &e.kind {
                EventKind::SyncFinished { .. } => bump(&mut t.syncs),
                EventKind::RoundAborted { lost: true, .. } => bump(&mut t.lost_rounds),
                EventKind::RoundAborted { lost: false, .. } => bump(&mut t.other_aborts),
                EventKind::StoreCallAcked { call, .. } => {
                    t.acked += 1;
                    if !audit.iter().any(|a| a.node == r.node && a.call == *call && a.accepted) {
                        t.unaccounted.push((r.node.clone(), *call));
                    }
                }
                _ => {}
            }
        }
        t.alias_fences = audit.iter().filter(|a| a.op == StoreOp::SwitchAlias && a.accepted).map(|a| a.fence).collect();
        t
    }

    /// Every write accounted for, fences rising, nothing unreadable, at least one sync.
    #[must_use]
    pub fn healthy(&self) -> bool {
        self.problem().is_none()
    }

    /// Why the demo is not OK, or None.
    #[must_use]
    pub fn problem(&self) -> Option<&'static str> {
        if self.spoke.is_empty() {
            return Some("no node sent a line: the node command failed or exited at once");
        }
        if self.garbage > 0 {
            return Some("a node sent lines that are not protocol events");
        }
        if !self.unaccounted.is_empty() {
            return Some("acknowledged writes are missing from the store's audit log");
        }
        if !self.alias_fences.windows(2).all(|w| w[0] < w[1]) {
            return Some("the alias fences did not rise");
        }
        (self.syncs.values().sum::<u64>() == 0).then_some("no node finished a sync")
    }
}

/// Runs the demo until `duration` passes or `cancel` fires.
pub async fn run(cfg: DemoConfig, cancel: CancellationToken) -> Result<Tally, HarnessError> {
    let store =
        Arc::new(Store::new(cfg.policy, None).map_err(|e| HarnessError::NodeProtocol { detail: e.to_string() })?);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| HarnessError::NodeProtocol { detail: format!("cannot listen for the store: {e}") })?;
    let store_addr =
        listener.local_addr().map_err(|e| HarnessError::NodeProtocol { detail: e.to_string() })?.to_string();
    let store_stop = cancel.child_token();
    let store_task = tokio::spawn(store::serve(listener, store.clone(), store_stop.clone()));

    let (tx, mut rx) = mpsc::channel::<Received>(65_536);
    let ttl_ms = cfg.ttl.as_millis() as u64;
    let mut nodes = Vec::new();
    for i in 1..=cfg.nodes {
        let config = NodeConfig {
            protocol: leasequake_reports::history::PROTOCOL_VERSION_MIN,
            protocol_max: Some(leasequake_reports::history::PROTOCOL_VERSION),
            node: format!("n{i}"),
            incarnation: 1,
            tenant: cfg.tenant.clone(),
            redis_url: cfg.redis_url.clone(),
            store_addr: store_addr.clone(),
            model_addr: Some(store_addr.clone()),
            lease: LeaseTimings {
                ttl_ms,
                renew_ms: ttl_ms / 3,
                acquire_wait_ms: ttl_ms / 4,
                command_timeout_ms: (ttl_ms / 60).clamp(50, 2000),
            },
            pipeline: PipelineShape {
                batches: 3,
                batch_size: 16,
                embed_ms: ttl_ms / 30,
                prepare_ms: ttl_ms / 60,
                checkpoints: vec![1, 2, 3, 4, 5, 6, 7],
                sync_points: vec![],
                pause_ms: ttl_ms / 30,
                store_timeout_ms: ttl_ms.max(1000),
            },
            fence_source: cfg.fence_source,
            seed: u64::from(i),
        };
        match NodeProcess::spawn(&cfg.node_cmd, config, tx.clone(), Stdio::null()) {
            Ok(n) => nodes.push(n),
            Err(e) => {
                store_stop.cancel(); // the nodes already started die with `nodes`
                let _ = store_task.await;
                return Err(e);
            }
        }
    }
    drop(tx);
    for n in &nodes {
        n.send(NodeCommand::Start)?;
    }
    let mut history = Vec::new();
    let deadline = tokio::time::sleep(cfg.duration);
    tokio::pin!(deadline);
    // Bounded by the duration (or Ctrl-C).
    loop {
        tokio::select! {
            () = &mut deadline => break,
            () = cancel.cancelled() => break,
            r = rx.recv() => match r { Some(r) => history.push(r), None => break },
        }
    }
    for n in nodes {
        n.stop(Duration::from_secs(5)).await;
    }
    while let Ok(r) = rx.try_recv() {
        history.push(r);
    }
    store_stop.cancel();
    let _ = store_task.await;
    Ok(Tally::of(&history, &store.audit_after(0)))
}
