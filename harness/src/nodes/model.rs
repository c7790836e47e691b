//! The embedding model service: the model a node's pipeline calls for each batch (protocol 4),
//! served beside the vector store (the store's container, `POST /v1/embed`), reached by each node
//! through a proxy link of its own. It works `ms` per call and keeps an audit log of every call
//! (arrival, answer, tenant, node, token, fence, batch), in arrival order: what model calls were
//! made, whatever a node reports, and what a stale node spent of the model's quota. A call whose
//! caller went away before the answer (a loss cancelled it, the node died) stays in the log
//! without a `finished_ns`.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use leasequake_reports::history::ModelRecord;
use serde::Deserialize;
use serde_json::json;

/// The longest a call may ask the model to work, ms.
pub const EMBED_MS_MAX: u64 = 60_000;
/// Most calls one run may make; past it the service answers 503.
pub const AUDIT_LIMIT: usize = 2_000_000;

/// A call's body.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbedRequest {
    /// Tenant.
    pub tenant: String,
    /// Node id.
    pub node: String,
    /// Owner token.
    pub token: String,
    /// Fence.
    #[serde(default)]
    pub fence: u64,
    /// Batch index.
    pub batch: u64,
    /// How long the model works on the batch, ms (the pipeline's `embed_ms`).
    pub ms: u64,
}

/// The service's audit log.
pub struct Model {
    calls: Mutex<Vec<ModelRecord>>,
    stamp: Arc<dyn Fn() -> u64 + Send + Sync>,
}

impl Model {
    /// A service stamping with `stamp` (CLOCK_MONOTONIC, or a simulation's clock).
    #[must_use]
    pub fn new(stamp: Arc<dyn Fn() -> u64 + Send + Sync>) -> Self {
        Self { calls: Mutex::new(Vec::new()), stamp }
    }

    fn calls(&self) -> std::sync::MutexGuard<'_, Vec<ModelRecord>> {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records a call's arrival; its seq, or why it is refused (status, reason).
    pub fn arrive(&self, req: &EmbedRequest) -> Result<u64, (u16, String)> {
        if req.ms > EMBED_MS_MAX {
            return Err((400, format!("ms {} is over {EMBED_MS_MAX}", req.ms)));
        }
        let mut calls = self.calls();
        if calls.len() >= AUDIT_LIMIT {
            return Err((503, "audit log full: the run is too long".into()));
        }
        let seq = calls.len() as u64 + 1;
        calls.push(ModelRecord {
            seq,
            arrived_ns: (self.stamp)(),
            finished_ns: None,
            tenant: req.tenant.clone(),
            node: req.node.clone(),
            token: req.token.clone(),
            fence: req.fence,
            batch: req.batch,
            ms: req.ms,
        });
        Ok(seq)
    }

    /// Records that call `seq` answered now.
    pub fn finish(&self, seq: u64) {
        let at = (self.stamp)();
        let mut calls = self.calls();
        if let Some(r) = usize::try_from(seq).ok().and_then(|s| s.checked_sub(1)).and_then(|i| calls.get_mut(i)) {
            r.finished_ns = Some(at);
        }
    }

    /// The last seq given (0 before the first call).
    pub fn audit_seq(&self) -> u64 {
        self.calls().len() as u64
    }

    /// The records with `seq > after`, in order.
    pub fn audit_after(&self, after: u64) -> Vec<ModelRecord> {
        self.calls().iter().skip(usize::try_from(after).unwrap_or(usize::MAX)).cloned().collect()
    }
}

/// One `POST /v1/embed`: the status and the JSON answer. Works `ms` (on the caller's clock:
/// tokio's, real or paused); a caller that goes away leaves the call unfinished in the log.
pub async fn embed(model: &Model, body: &[u8]) -> (u16, String) {
    let req = match serde_json::from_slice::<EmbedRequest>(body) {
        Ok(r) => r,
        Err(e) => return (400, json!({ "error": format!("bad request body: {e}") }).to_string()),
    };
    let seq = match model.arrive(&req) {
        Ok(seq) => seq,
        Err((status, why)) => return (status, json!({ "error": why }).to_string()),
    };
    tokio::time::sleep(Duration::from_millis(req.ms)).await;
    model.finish(seq);
    (200, json!({ "ok": true, "batch": req.batch, "seq": seq }).to_string())
}

#[cfg(test)]
mod tests;
