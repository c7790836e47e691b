//! The demo: several workers contend for one tenant's lease on a real Redis and run a pretend
//! pipeline with the seven checkpoints, releasing after each sync. It shows the protocol working,
//! not the harness: no faults, no checker. Every sync's fence is printed; fences must rise.

use std::time::Duration;

use anyhow::Context;
use redis_lease::{LeaseClient, LeaseConfig, LeaseError, UniqueTokens};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{info, warn};

/// The seven checkpoints of the tenant sync pipeline, in order.
pub const CHECKPOINTS: [&str; 7] = [
    "after-prepare",
    "between-batches",
    "before-create",
    "after-create",
    "before-switch",
    "after-switch",
    "before-persist",
];

/// What the demo runs.
#[derive(Debug, Clone)]
pub struct DemoConfig {
    /// Redis to use.
    pub redis_url: String,
    /// How many workers contend.
    pub workers: u32,
    /// The tenant whose lease they contend for.
    pub tenant: String,
    /// The lease ttl (other durations keep the production ratios).
    pub ttl: Duration,
    /// How long to run.
    pub duration: Duration,
    /// Pretend work between checkpoints.
    pub step: Duration,
}

/// One completed sync.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sync {
    /// Worker index.
    pub worker: u32,
    /// The fence of the acquisition that completed it.
    pub fence: u64,
}

/// Runs the demo until `duration` passes or `cancel` fires; returns the syncs in completion order.
pub async fn run(cfg: DemoConfig, cancel: CancellationToken) -> anyhow::Result<Vec<Sync>> {
    let client = redis::Client::open(cfg.redis_url.as_str()).context("bad Redis URL")?;
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Sync>(1024);
    let tracker = TaskTracker::new();
    for worker in 0..cfg.workers {
        let conn = tokio::time::timeout(Duration::from_secs(5), client.get_multiplexed_async_connection())
            .await
            .context("Redis did not accept a connection within 5 s")?
            .context("cannot connect to Redis")?;
        let lease = LeaseClient::new(conn, LeaseConfig::scaled(cfg.ttl), UniqueTokens::new(format!("w{worker}"), 1)?)?;
        tracker.spawn(worker_loop(worker, lease, cfg.clone(), tx.clone(), cancel.child_token()));
    }
    drop(tx);
    tracker.close();
    let stop = cancel.clone();
    let deadline = tokio::time::sleep(cfg.duration);
    tokio::pin!(deadline);
    let mut syncs = Vec::new();
    loop {
        tokio::select! {
            () = &mut deadline => stop.cancel(),
            got = rx.recv() => match got {
                Some(sync) => syncs.push(sync),
                None => break,
            },
        }
    }
    tokio::time::timeout(Duration::from_secs(5), tracker.wait()).await.context("workers did not stop within 5 s")?;
    Ok(syncs)
}

async fn worker_loop(
    worker: u32,
    lease: LeaseClient<redis::aio::MultiplexedConnection>,
    cfg: DemoConfig,
    done: tokio::sync::mpsc::Sender<Sync>,
    cancel: CancellationToken,
) {
    while !cancel.is_cancelled() {
        let guard = tokio::select! {
            () = cancel.cancelled() => return,
            g = lease.acquire(&cfg.tenant) => match g {
                Ok(g) => g,
                Err(e) => { info!(worker, error = %e, "not acquired; retrying"); continue; }
            },
        };
        let fence = guard.fence();
        let mut outcome: Result<(), LeaseError> = Ok(());
        for checkpoint in CHECKPOINTS {
            tokio::time::sleep(cfg.step).await;
            outcome = guard.ensure_owned(checkpoint).await;
            if outcome.is_err() {
                break;
            }
        }
        match outcome {
            Ok(()) => {
                let _ = done.send(Sync { worker, fence }).await;
            }
            Err(e) => warn!(worker, fence, error = %e, "sync aborted"),
        }
        if let Err(e) = guard.release().await {
            warn!(worker, fence, error = %e, "release failed");
        }
    }
}
