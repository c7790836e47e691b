//! The round loop and one round's pipeline: acquire, prepare, embed, create, upsert, switch,
//! persist, drop the old live collection, release.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use leasequake_reports::history::{EventKind, FenceSource, StoreOp};
use redsync::RedsyncError;

use super::{http, Held, Lost, Node};

/// Why a round ended early: the lease was lost, or something else failed.
enum Abort {
    Lost(String),
    Failed(String),
}

impl From<Lost> for Abort {
    fn from(l: Lost) -> Self {
        Abort::Lost(l.0)
    }
}

impl Node {
    pub(super) fn rounds(&mut self) {
        while !self.cmds.stopped.load(Ordering::SeqCst) {
            self.out.round.fetch_add(1, Ordering::SeqCst);
            self.out.emit(EventKind::AcquireAttempt);
            let Some((held, fence, sent)) = self.acquire() else { continue };
            self.current_token = held.token.clone();
            self.out.emit(EventKind::Acquired { token: held.token.clone(), fence, sent_ns: Some(sent) });
            match self.round(&held, fence) {
                Ok(collection) => {
                    self.out.emit(EventKind::SyncFinished { token: held.token.clone(), fence, collection })
                }
                Err(Abort::Lost(reason)) => {
                    self.out.emit(EventKind::RoundAborted { token: held.token.clone(), lost: true, reason })
                }
                Err(Abort::Failed(reason)) => {
                    self.out.emit(EventKind::RoundAborted { token: held.token.clone(), lost: false, reason })
                }
            }
            let outcome = self.release(&held);
            self.out.emit(EventKind::Released { token: held.token.clone(), outcome });
            thread::sleep(Duration::from_millis(self.cfg.pipeline.pause_ms));
        }
    }

    fn release(&self, held: &Held) -> String {
        held.stop.store(true, Ordering::SeqCst);
        let lock = {
            let s = super::guard(&held.state);
            redsync::Lock { resource: s.0.resource.clone(), value: s.0.value.clone(), ttl: s.0.ttl, expiry: s.0.expiry }
        };
        match self.dlm.unlock(&lock) {
            Ok(()) => "deleted".into(),
            Err(RedsyncError::UnlockFailed(errors)) if errors.includes(RedsyncError::InvalidLease) => {
                "not_owner".into()
            }
            Err(e) => format!("error: {e}"),
        }
    }

    fn round(&mut self, held: &Arc<Held>, mut fence: u64) -> Result<String, Abort> {
        let p = self.cfg.pipeline.clone();
        if self.cfg.fence_source == FenceSource::Store {
            let answer = self.store(held, StoreOp::BeginEpoch, 0, None, 0, &[])?;
            fence = answer["fence"].as_u64().ok_or_else(|| Abort::Failed("no fence from the store".into()))?;
        }
        held.wait(&self.out, p.prepare_ms)?;
        self.ensure_owned(held, 1)?;
        for batch in 0..p.batches {
            self.model_call(held, batch)?;
            if batch + 1 < p.batches {
                self.ensure_owned(held, 2)?;
            }
        }
        self.ensure_owned(held, 3)?;
        let tenant = self.cfg.tenant.clone();
        let view = self.tenant_view()?;
        // Every collection but the alias's target: an aborted round's temporary, or a live one
        // replaced by a round that stopped before its own drop.
        for c in view["collections"].as_array().cloned().unwrap_or_default() {
            let name = c["name"].as_str().unwrap_or_default().to_owned();
            if view["alias"].as_str() != Some(name.as_str()) {
                self.store(held, StoreOp::DropCollection, fence, Some(&name), 0, &[404, 409])?;
            }
        }
        let round = self.out.round.load(Ordering::SeqCst);
        let name = format!("{tenant}-f{fence}-{}-i{}-r{round}", self.cfg.node, self.cfg.incarnation);
        self.store(held, StoreOp::CreateCollection, fence, Some(&name), 0, &[])?;
        self.ensure_owned(held, 4)?;
        for _ in 0..p.batches {
            self.store(held, StoreOp::Upsert, fence, Some(&name), p.batch_size, &[])?;
        }
        self.ensure_owned(held, 5)?;
        self.store(held, StoreOp::SwitchAlias, fence, Some(&name), 0, &[])?;
        self.ensure_owned(held, 6)?;
        self.ensure_owned(held, 7)?;
        self.store(held, StoreOp::PersistRecord, fence, Some(&name), 0, &[])?;
        if let Some(old) = view["alias"].as_str().filter(|a| *a != name) {
            self.store(held, StoreOp::DropCollection, fence, Some(old), 0, &[404, 409])?;
        }
        Ok(name)
    }

    fn ensure_owned(&mut self, held: &Held, n: u8) -> Result<(), Abort> {
        self.hold_at_sync()?;
        if self.cfg.pipeline.checkpoints.contains(&n) {
            let out = self.out.clone();
            let passed = held.decide(&out, Some(n), |decided| {
                out.emit(EventKind::CheckpointPassed {
                    token: held.token.clone(),
                    number: n,
                    decided_ns: Some(decided),
                });
            });
            if let Err(Lost(why)) = passed {
                out.emit(EventKind::CheckpointFailed { token: held.token.clone(), number: n, reason: why.clone() });
                return Err(Abort::Lost(why));
            }
        }
        if self.cfg.pipeline.sync_points.contains(&n) {
            self.pending_sync = Some(n);
        }
        Ok(())
    }

    /// Holds at a pending sync point until its `go` (or `stop`).
    fn hold_at_sync(&mut self) -> Result<(), Abort> {
        let Some(n) = self.pending_sync.take() else { return Ok(()) };
        let token = self.current_token.clone();
        self.out.emit(EventKind::SyncPoint { token, number: n });
        loop {
            if self.cmds.stopped.load(Ordering::SeqCst) {
                return Err(Abort::Failed("stopped".into()));
            }
            let mut go = super::guard(&self.cmds.go);
            if let Some(i) = go.iter().position(|c| *c == n) {
                go.remove(i);
                return Ok(());
            }
            go.clear(); // a `go` for another checkpoint is dropped
            drop(go);
            thread::sleep(Duration::from_millis(5));
        }
    }

    fn model_call(&mut self, held: &Held, batch: u32) -> Result<(), Abort> {
        self.hold_at_sync()?;
        let mut decided_ns = 0;
        held.decide(&self.out, None, |d| decided_ns = d)?;
        let began = Instant::now();
        let extra = self.cmds.slow_model_ms.load(Ordering::SeqCst);
        held.wait(&self.out, self.cfg.pipeline.embed_ms + extra)?;
        let ms = u64::try_from(began.elapsed().as_millis()).unwrap_or(u64::MAX);
        let out = self.out.clone();
        held.decide(&out, None, |_| {
            out.emit(EventKind::ModelCall { token: held.token.clone(), batch, ms, decided_ns: Some(decided_ns) });
        })?;
        Ok(())
    }

    fn tenant_view(&self) -> Result<serde_json::Value, Abort> {
        let timeout = Duration::from_millis(self.cfg.pipeline.store_timeout_ms);
        let path = format!("/v1/tenants/{}", self.cfg.tenant);
        let (status, view) = http(&self.cfg.store_addr, "GET", &path, "", timeout).map_err(Abort::Failed)?;
        if status == 200 {
            Ok(view)
        } else {
            Err(Abort::Failed(format!("tenant view: {status}")))
        }
    }

    /// One store call, decided under the lease (no call once it is lost), held at a pending sync
    /// point after `store_call_sent` (the node has committed to the write).
    #[allow(clippy::too_many_arguments)]
    fn store(
        &mut self,
        held: &Held,
        op: StoreOp,
        fence: u64,
        collection: Option<&str>,
        points: u32,
        tolerate: &[u16],
    ) -> Result<serde_json::Value, Abort> {
        self.call += 1;
        let call = self.call;
        let body = serde_json::json!({"tenant": self.cfg.tenant, "node": self.cfg.node, "token": held.token,
            "fence": fence, "call": call, "collection": collection, "points": points})
        .to_string();
        let out = self.out.clone();
        held.decide(&out, None, |decided| {
            out.emit(EventKind::StoreCallSent {
                token: held.token.clone(),
                fence,
                op,
                call,
                decided_ns: Some(decided),
            });
        })?;
        self.hold_at_sync()?;
        let path = match op {
            StoreOp::BeginEpoch => "/v1/epoch",
            StoreOp::CreateCollection => "/v1/create",
            StoreOp::Upsert => "/v1/upsert",
            StoreOp::SwitchAlias => "/v1/alias",
            StoreOp::PersistRecord => "/v1/record",
            StoreOp::DropCollection => "/v1/drop",
        };
        let timeout = Duration::from_millis(self.cfg.pipeline.store_timeout_ms);
        let token = held.token.clone();
        match http(&self.cfg.store_addr, "POST", path, &body, timeout) {
            Err(detail) => {
                self.out.emit(EventKind::StoreCallUnknown { token, call, detail });
                Err(Abort::Failed("store call outcome unknown".into()))
            }
            Ok((200, answer)) => {
                self.out.emit(EventKind::StoreCallAcked { token, call });
                Ok(answer)
            }
            Ok((status, answer)) => {
                let reason = answer["error"].as_str().map_or_else(|| status.to_string(), str::to_owned);
                self.out.emit(EventKind::StoreCallRejected { token, call, reason });
                if tolerate.contains(&status) {
                    Ok(answer)
                } else {
                    Err(Abort::Failed(format!("store rejected {op:?}")))
                }
            }
        }
    }
}
