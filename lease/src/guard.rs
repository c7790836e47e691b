//! `LeaseGuard`: one held acquisition. Owns the renewal task, the sticky loss token and the
//! checkpoints (`ensure_owned`). The decisions come from `ownership`; the Redis calls from
//! `script`. This file only wires them to time, tasks and cancellation.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use redis::aio::ConnectionLike;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::clock::{Clock, Spawn};
use crate::config::{LeaseConfig, WAIT_SLACK};
use crate::error::LeaseError;
use crate::flaw::{self, Flaw};
use crate::ownership::{CheckOutcome, Loss, LossReason, Ownership, RenewOutcome};
use crate::script::{LeaseKeys, RedisOps};
use crate::token::OwnerToken;

/// Counters of one acquisition. Ownership-loss cancellations are kept apart from other failures.
#[derive(Debug, Default)]
struct Counters {
    checks_passed: AtomicU64,
    loss_cancellations: AtomicU64,
    renewals: AtomicU64,
    renewal_failures: AtomicU64,
    other_failures: AtomicU64,
}

/// A snapshot of a guard's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GuardCounters {
    /// Checkpoints that confirmed ownership.
    pub checks_passed: u64,
    /// Checkpoints refused because ownership was lost (the first detection included).
    pub loss_cancellations: u64,
    /// Renewals that extended the lease.
    pub renewals: u64,
    /// Renewals that did not (each one ends the lease, unless a flaw ignores it).
    pub renewal_failures: u64,
    /// Failures that say nothing about ownership (a release that Redis did not answer, say).
    pub other_failures: u64,
}

/// What `release` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Released {
    /// Our key was deleted.
    Deleted,
    /// The key was no longer ours (expired, or a successor's), so it was left alone.
    NotOwner,
    /// An earlier `release` already succeeded; nothing was sent.
    AlreadyReleased,
}

/// What a lease tells an observer, as it happens. For logs and test harnesses; the protocol
/// itself never depends on an observer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseEvent {
    /// A renewal extended the lease.
    Renewed {
        /// The acquisition's owner token.
        token: OwnerToken,
        /// The acquisition's fence.
        fence: u64,
        /// When this renewal was sent: the validity it confirmed counts from here.
        sent_at: Instant,
    },
    /// Ownership was lost (the first, sticky loss).
    Lost {
        /// The acquisition's owner token.
        token: OwnerToken,
        /// The loss.
        loss: Loss,
    },
}

/// Receives `LeaseEvent`s. Called on the task that saw the event (the renewal task, or a
/// checkpoint); it must not block.
pub type Observer = Arc<dyn Fn(&LeaseEvent) + Send + Sync>;

pub(crate) struct Shared {
    pub tenant: String,
    pub keys: LeaseKeys,
    pub token: OwnerToken,
    pub fence: u64,
    pub config: LeaseConfig,
    pub clock: Arc<dyn Clock>,
    state: Mutex<Ownership>,
    /// Cancelled, for good, by the first loss. Checked on the first line of every checkpoint.
    lost: CancellationToken,
    /// Cancelled by `release` or drop: stops the renewal task.
    stop: CancellationToken,
    released: AtomicBool,
    counters: Counters,
    observer: Option<Observer>,
}

impl Shared {
    pub fn new(
        tenant: String,
        keys: LeaseKeys,
        token: OwnerToken,
        fence: u64,
        config: LeaseConfig,
        clock: Arc<dyn Clock>,
        ownership: Ownership,
    ) -> Self {
        Self {
            tenant,
            keys,
            token,
            fence,
            config,
            clock,
            state: Mutex::new(ownership),
            lost: CancellationToken::new(),
            stop: CancellationToken::new(),
            released: AtomicBool::new(false),
            counters: Counters::default(),
            observer: None,
        }
    }

    pub fn with_observer(mut self, observer: Option<Observer>) -> Self {
        self.observer = observer;
        self
    }

    fn state(&self) -> MutexGuard<'_, Ownership> {
        // Never held across an await; a panic while held cannot leave it half-updated, since every
        // update is a single assignment.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn flaw(&self, f: Flaw) -> bool {
        flaw::is(self.config.flaw, f)
    }

    /// Records the first loss (later ones are ignored) and cancels the sticky token.
    fn lose(&self, reason: LossReason, checkpoint: Option<&str>) -> Loss {
        let mut state = self.state();
        let (loss, first) = state.lose(reason, checkpoint, self.clock.now());
        // A release ends ownership for good too, but it is the holder's own choice: no warning,
        // and observers are not told of a loss.
        let announce = first && loss.reason != LossReason::Released;
        // The `NonStickyLoss` flaw forgets the loss at once: nothing is cancelled for good.
        if first && !self.flaw(Flaw::NonStickyLoss) {
            self.lost.cancel();
        }
        if announce {
            warn!(tenant = %self.tenant, token = %self.token, fence = self.fence,
                  checkpoint = loss.checkpoint.as_deref().unwrap_or("-"),
                  reason = loss.reason.kind(), after_ms = loss.after.as_millis() as u64,
                  "lease ownership lost");
        }
        let loss = loss.clone();
        drop(state);
        if announce {
            self.notify(&LeaseEvent::Lost { token: self.token.clone(), loss: loss.clone() });
        }
        loss
    }

    fn notify(&self, event: &LeaseEvent) {
        if let Some(observer) = &self.observer {
            observer(event);
        }
    }

    fn loss(&self) -> Option<Loss> {
        self.state().loss().cloned()
    }

    fn lost_error(&self, loss: Loss) -> LeaseError {
        self.counters.loss_cancellations.fetch_add(1, Ordering::Relaxed);
        LeaseError::Lost { tenant: self.tenant.clone(), loss }
    }
}

/// Runs `fut` for at most `budget` on `clock`; `None` if it did not finish.
pub(crate) async fn timed<T>(
    clock: &dyn Clock,
    budget: Duration,
    fut: impl std::future::Future<Output = T>,
) -> Option<T> {
    let deadline = clock.now() + budget;
    tokio::select! {
        biased;
        // Cancel-safety: dropping either branch drops a Redis request future; the connection
        // stays usable, and the caller treats the outcome as unknown.
        out = fut => Some(out),
        () = clock.sleep_until(deadline) => None,
    }
}

/// One held acquisition of a tenant's lease. Dropping it stops renewal but sends nothing; call
/// [`LeaseGuard::release`] to free the lease for others at once.
#[must_use = "dropping the guard stops renewal; release it explicitly"]
pub struct LeaseGuard<C> {
    shared: Arc<Shared>,
    ops: RedisOps<C>,
}

impl<C: ConnectionLike + Clone + Send + Sync + 'static> LeaseGuard<C> {
    pub(crate) fn start(shared: Shared, ops: RedisOps<C>, spawner: &dyn Spawn) -> Self {
        let shared = Arc::new(shared);
        info!(tenant = %shared.tenant, token = %shared.token, fence = shared.fence, "lease acquired");
        spawner.spawn(Box::pin(renewal(shared.clone(), ops.clone())));
        Self { shared, ops }
    }

    /// The tenant.
    #[must_use]
    pub fn tenant(&self) -> &str {
        &self.shared.tenant
    }
    /// This acquisition's owner token.
    #[must_use]
    pub fn token(&self) -> &OwnerToken {
        &self.shared.token
    }
    /// The fence the acquire script issued (strictly greater than every earlier owner's, as long
    /// as Redis kept the counter).
    #[must_use]
    pub fn fence(&self) -> u64 {
        self.shared.fence
    }
    /// Until when the lease is locally valid without hearing from Redis again.
    #[must_use]
    pub fn valid_until(&self) -> Instant {
        self.shared.state().deadline()
    }
    /// When the acquire that won this lease was sent: its validity counts from there.
    #[must_use]
    pub fn acquire_sent_at(&self) -> Instant {
        self.shared.state().acquire_sent_at()
    }

    /// A decision without Redis I/O (before a write, before new work): succeeds with the instant
    /// it read the clock at, while ownership is not lost and the local validity holds; marks the
    /// loss (`Expired`) once the validity has run out, even while the renewal task is stalled.
    pub fn still_valid(&self) -> Result<Instant, LeaseError> {
        self.decide(None).map(|(now, _)| now)
    }

    /// The first step of every decision: reads the clock, then the sticky loss, then the local
    /// validity at that reading. The clock comes first: a loss that lands after the check is
    /// announced after this reading, so no decision is ever stamped after a loss it could have
    /// seen. Returns the reading and the deadline; marks an `Expired` loss past the deadline.
    fn decide(&self, checkpoint: Option<&str>) -> Result<(Instant, Instant), LeaseError> {
        let s = &self.shared;
        let now = s.clock.now();
        let non_sticky = s.flaw(Flaw::NonStickyLoss);
        if s.lost.is_cancelled() && !non_sticky {
            if let Some(loss) = s.loss() {
                return Err(s.lost_error(loss));
            }
        }
        let (deadline, expired) = {
            let state = s.state();
            (state.deadline(), state.check_deadline(now))
        };
        match expired.filter(|_| !non_sticky && !s.flaw(Flaw::RenewalErrorsIgnored)) {
            Some(reason) => Err(s.lost_error(s.lose(reason, checkpoint))),
            None => Ok((now, deadline)),
        }
    }
    /// The sticky loss record, once ownership is lost.
    #[must_use]
    pub fn loss(&self) -> Option<Loss> {
        self.shared.loss()
    }
    /// The counters so far.
    #[must_use]
    pub fn counters(&self) -> GuardCounters {
        let c = &self.shared.counters;
        GuardCounters {
            checks_passed: c.checks_passed.load(Ordering::Relaxed),
            loss_cancellations: c.loss_cancellations.load(Ordering::Relaxed),
            renewals: c.renewals.load(Ordering::Relaxed),
            renewal_failures: c.renewal_failures.load(Ordering::Relaxed),
            other_failures: c.other_failures.load(Ordering::Relaxed),
        }
    }

    /// A token cancelled when ownership is lost, for wiring into the caller's own cancellation.
    #[must_use]
    pub fn lost_token(&self) -> CancellationToken {
        self.shared.lost.clone()
    }

    /// Completes when ownership is lost, with the loss. Also fires when the local validity runs out
    /// while the renewal task is stalled. Cancel-safe: use it in `select!`.
    pub async fn lost(&self) -> Loss {
        // Bounded: each turn either returns or waits for a deadline that a renewal moved.
        loop {
            let deadline = self.shared.state().deadline();
            tokio::select! {
                biased;
                () = self.shared.lost.cancelled() => {
                    if let Some(loss) = self.shared.loss() {
                        return loss;
                    }
                }
                () = self.shared.clock.sleep_until(deadline) => {
                    let now = self.shared.clock.now();
                    let expired = self.shared.state().check_deadline(now);
                    let ignored = expired.is_some();
                    if let Some(reason) = expired.filter(|_| !self.shared.flaw(Flaw::RenewalErrorsIgnored)) {
                        return self.shared.lose(reason, None);
                    }
                    if ignored {
                        // The flaw ignores the expiry; it looks again a renewal interval later
                        // (a deadline already past would be ready at once, a busy loop).
                        self.shared.clock.sleep_until(now + self.shared.config.renew_interval()).await;
                    }
                }
            }
        }
    }

    /// A checkpoint: succeeds only while we provably own the lease.
    ///
    /// The first line checks the sticky loss token: once lost, this fails at once without touching
    /// Redis, forever. Otherwise it checks the local validity, then reads the key and compares the
    /// owner token, within what is left of the validity. Any failure marks the loss.
    pub async fn ensure_owned(&self, checkpoint: &str) -> Result<(), LeaseError> {
        self.ensure_owned_at(checkpoint).await.map(|_| ())
    }

    /// [`LeaseGuard::ensure_owned`], returning the instant at which it decided that ownership
    /// held (the clock reading its validity check used).
    pub async fn ensure_owned_at(&self, checkpoint: &str) -> Result<Instant, LeaseError> {
        let s = &self.shared;
        let non_sticky = s.flaw(Flaw::NonStickyLoss);
        let (now, deadline) = self.decide(Some(checkpoint))?;
        let budget = if non_sticky {
            s.config.command_timeout
        } else {
            deadline.saturating_duration_since(now).min(s.config.command_timeout)
        };
        let outcome = match timed(s.clock.as_ref(), budget, self.ops.owner(&s.keys)).await {
            Some(Ok(Some(v))) if v == s.token.as_str() => CheckOutcome::Ours,
            Some(Ok(Some(_))) => CheckOutcome::Other,
            Some(Ok(None)) => CheckOutcome::Missing,
            Some(Err(e)) => CheckOutcome::Failed(e.to_string()),
            None => CheckOutcome::Failed(format!("no answer within {} ms", budget.as_millis())),
        };
        let decided = s.clock.now();
        if non_sticky && outcome == CheckOutcome::Ours {
            // The flaw: Redis shows our token again, so the node writes again.
            s.counters.checks_passed.fetch_add(1, Ordering::Relaxed);
            return Ok(decided);
        }
        let mut decision = s.state().on_check(outcome, decided);
        if s.flaw(Flaw::RenewalErrorsIgnored) && decision == Some(LossReason::Expired) {
            decision = None;
        }
        match decision {
            Some(reason) => Err(s.lost_error(s.lose(reason, Some(checkpoint)))),
            // The renewal task may have lost the lease while we were reading.
            None => match s.loss().filter(|_| !non_sticky) {
                Some(loss) => Err(s.lost_error(loss)),
                None => {
                    s.counters.checks_passed.fetch_add(1, Ordering::Relaxed);
                    debug!(tenant = %s.tenant, fence = s.fence, checkpoint, "ownership confirmed");
                    Ok(decided)
                }
            },
        }
    }

    /// Stops renewal and deletes the key if, and only if, it still holds our token. Idempotent:
    /// after one success, later calls send nothing. Ownership counts as lost (`Released`) from here.
    pub async fn release(&self) -> Result<Released, LeaseError> {
        let s = &self.shared;
        s.stop.cancel();
        if s.released.load(Ordering::Acquire) {
            return Ok(Released::AlreadyReleased);
        }
        s.lose(LossReason::Released, None);
        let started = s.clock.now();
        let budget = s.config.command_timeout;
        let result = match timed(s.clock.as_ref(), budget, self.ops.release(&s.keys, &s.token)).await {
            Some(Ok(true)) => Ok(Released::Deleted),
            Some(Ok(false)) => Ok(Released::NotOwner),
            Some(Err(e)) => Err(LeaseError::from_redis("release", s.clock.now() - started, e)),
            None => Err(LeaseError::Indeterminate {
                op: "release",
                elapsed: budget,
                detail: format!("no answer within {} ms", budget.as_millis()),
            }),
        };
        match &result {
            Ok(outcome) => {
                s.released.store(true, Ordering::Release);
                info!(tenant = %s.tenant, fence = s.fence, outcome = ?outcome, "lease released");
            }
            Err(e) => {
                s.counters.other_failures.fetch_add(1, Ordering::Relaxed);
                warn!(tenant = %s.tenant, fence = s.fence, error = %e, "lease release failed; the key expires by its ttl");
            }
        }
        result
    }
}

impl<C> Drop for LeaseGuard<C> {
    fn drop(&mut self) {
        // Stop renewing; the key then expires by its ttl. No Redis I/O in Drop.
        self.shared.stop.cancel();
    }
}

/// The renewal task: every interval, a compare-owner-then-PEXPIRE, until stopped or lost.
async fn renewal<C: ConnectionLike + Clone + Send + Sync + 'static>(s: Arc<Shared>, ops: RedisOps<C>) {
    let ttl_ms = s.config.ttl.as_millis() as u64;
    let ignore = s.flaw(Flaw::RenewalErrorsIgnored);
    // Bounded by the lease: each turn either renews (and waits an interval) or ends the task.
    loop {
        let due = s.state().renewal_due();
        tokio::select! {
            biased;
            () = s.stop.cancelled() => return,
            () = s.lost.cancelled() => return,
            () = s.clock.sleep_until(due) => {}
        }
        let sent_at = s.clock.now();
        // Read after the send time: a loss that lands from here on is stamped after `sent_at`, so
        // no renewal is ever sent after the loss it could have seen.
        if s.lost.is_cancelled() {
            return;
        }
        let (deadline, expired) = {
            let state = s.state();
            (state.deadline(), state.check_deadline(sent_at))
        };
        if let Some(reason) = expired.filter(|_| !ignore) {
            s.counters.renewal_failures.fetch_add(1, Ordering::Relaxed);
            s.lose(reason, None);
            return;
        }
        let budget = if ignore {
            s.config.command_timeout
        } else {
            deadline.saturating_duration_since(sent_at).min(s.config.command_timeout)
        };
        let mut outcome = match timed(s.clock.as_ref(), budget, ops.renew(&s.keys, &s.token, ttl_ms)).await {
            Some(Ok(true)) => RenewOutcome::Extended,
            Some(Ok(false)) => RenewOutcome::NotOwner,
            Some(Err(e)) => RenewOutcome::Failed(e.to_string()),
            None => RenewOutcome::Failed(format!("no answer within {} ms", budget.as_millis())),
        };
        if s.stop.is_cancelled() || s.lost.is_cancelled() {
            return; // released or lost while the renewal was in flight: its answer no longer matters
        }
        let mut shortfall = None;
        if let (RenewOutcome::Extended, Some(guard)) = (&outcome, s.config.replication) {
            let wait_ms = guard.timeout.as_millis() as u64;
            match timed(s.clock.as_ref(), guard.timeout + WAIT_SLACK, ops.wait_replicas(guard.replicas, wait_ms)).await
            {
                Some(Ok(acked)) if acked >= u64::from(guard.replicas) => {}
                Some(Ok(acked)) => shortfall = Some(LossReason::ReplicationShortfall { acked, wanted: guard.replicas }),
                Some(Err(e)) => outcome = RenewOutcome::Failed(format!("WAIT failed: {e}")),
                None => outcome = RenewOutcome::Failed("WAIT did not answer".into()),
            }
        }
        if matches!(outcome, RenewOutcome::Failed(_)) && s.flaw(Flaw::RenewalStopsAfterReconnect) {
            // The flaw: the watchdog dies quietly with the connection and never marks the loss.
            warn!(tenant = %s.tenant, fence = s.fence, "renewal stopped after a connection error");
            return;
        }
        let decision = match shortfall {
            Some(reason) if !ignore => Some(reason),
            _ => {
                // The `ValidityFromReply` flaw counts the confirmed validity from the reply.
                let basis = if s.flaw(Flaw::ValidityFromReply) { s.clock.now() } else { sent_at };
                s.state().on_renewal(basis, outcome, s.clock.now(), ignore)
            }
        };
        match decision {
            None => {
                s.counters.renewals.fetch_add(1, Ordering::Relaxed);
                s.notify(&LeaseEvent::Renewed { token: s.token.clone(), fence: s.fence, sent_at });
                debug!(tenant = %s.tenant, fence = s.fence, "lease renewed");
            }
            Some(reason) => {
                s.counters.renewal_failures.fetch_add(1, Ordering::Relaxed);
                s.lose(reason, None);
                return;
            }
        }
    }
}
