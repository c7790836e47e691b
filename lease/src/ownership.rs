//! The protocol's decisions, with no I/O: how long a lease is valid, when to renew, and what each
//! renewal or owner-check outcome means. Sticky loss lives here: the first loss is recorded and
//! never replaced or undone.
//!
//! Everything takes `now` and outcomes as arguments, so the same decisions can run against real
//! Redis (see `guard`) or, later, a model on a virtual clock.

use std::fmt;
use std::time::Duration;

use tokio::time::Instant;

/// Why ownership was lost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LossReason {
    /// An owner check found another owner's token in the key.
    HeldByOther,
    /// An owner check found no key (it expired or was deleted).
    KeyMissing,
    /// An owner check could not read Redis (error or timeout).
    ReadError(String),
    /// A renewal found the key no longer holds our token.
    RenewalRejected,
    /// A renewal failed: a Redis error, a dropped connection, or no answer in time.
    RenewalFailed(String),
    /// A renewal answered only after the local validity ran out.
    RenewalLate,
    /// The local validity ran out with no renewal confirmed (e.g. the renewal thread stalled).
    Expired,
    /// Fewer replicas than required acknowledged the acquire or renewal.
    ReplicationShortfall {
        /// Replicas that acknowledged.
        acked: u64,
        /// Replicas required.
        wanted: u32,
    },
    /// The guard was released by its holder.
    Released,
}

impl LossReason {
    /// A stable snake_case name for reports and the node protocol.
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            LossReason::HeldByOther => "held_by_other",
            LossReason::KeyMissing => "key_missing",
            LossReason::ReadError(_) => "read_error",
            LossReason::RenewalRejected => "renewal_rejected",
            LossReason::RenewalFailed(_) => "renewal_failed",
            LossReason::RenewalLate => "renewal_late",
            LossReason::Expired => "expired",
            LossReason::ReplicationShortfall { .. } => "replication_shortfall",
            LossReason::Released => "released",
        }
    }
}

impl fmt::Display for LossReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LossReason::HeldByOther => f.write_str("the key holds another owner's token"),
            LossReason::KeyMissing => f.write_str("the key is gone"),
            LossReason::ReadError(e) => write!(f, "owner check failed: {e}"),
            LossReason::RenewalRejected => f.write_str("renewal rejected: not the owner"),
            LossReason::RenewalFailed(e) => write!(f, "renewal failed: {e}"),
            LossReason::RenewalLate => f.write_str("renewal answered after the lease could have expired"),
            LossReason::Expired => f.write_str("local validity ran out before a renewal was confirmed"),
            LossReason::ReplicationShortfall { acked, wanted } => {
                write!(f, "{acked} of {wanted} replicas acknowledged")
            }
            LossReason::Released => f.write_str("released"),
        }
    }
}

/// The sticky record of the first loss of one acquisition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loss {
    /// Why.
    pub reason: LossReason,
    /// The checkpoint that detected it, when a checkpoint did (`None`: the renewal task).
    pub checkpoint: Option<String>,
    /// Time from sending the acquire to the loss.
    pub after: Duration,
}

impl fmt::Display for Loss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({} ms after acquire", self.reason, self.after.as_millis())?;
        if let Some(c) = &self.checkpoint {
            write!(f, ", at checkpoint `{c}`")?;
        }
        f.write_str(")")
    }
}

/// What one renewal attempt came back with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RenewOutcome {
    /// The script extended our key.
    Extended,
    /// The script found the key not ours.
    NotOwner,
    /// An error or no answer in time.
    Failed(String),
}

/// What one owner check read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CheckOutcome {
    /// The key holds our token.
    Ours,
    /// The key holds another token.
    Other,
    /// No key.
    Missing,
    /// An error or no answer in time.
    Failed(String),
}

/// Timings the decisions need, copied from the config.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timing {
    pub ttl: Duration,
    pub renew_interval: Duration,
    pub drift: Duration,
    /// The `NoLocalDeadline` flaw: the deadline is never reached.
    pub no_deadline: bool,
}

/// How far off the `NoLocalDeadline` flaw puts the deadline: never reached in a run.
const NEVER: Duration = Duration::from_secs(365 * 24 * 3600);

/// One acquisition's view of its own ownership.
#[derive(Debug)]
pub(crate) struct Ownership {
    timing: Timing,
    acquire_sent_at: Instant,
    /// When the newest confirmed write (acquire or renewal) was *sent*: validity counts from
    /// there, because Redis may have applied it at any moment after.
    confirmed_sent_at: Instant,
    loss: Option<Loss>,
}

impl Ownership {
    /// Ownership granted by an acquire that was sent at `sent_at`.
    pub fn acquired(timing: Timing, sent_at: Instant) -> Self {
        Self { timing, acquire_sent_at: sent_at, confirmed_sent_at: sent_at, loss: None }
    }

    /// When the acquire that granted this ownership was sent.
    pub fn acquire_sent_at(&self) -> Instant {
        self.acquire_sent_at
    }

    /// The `ValidityFromReply` flaw: validity counts from `at` (the reply) instead of the send.
    pub fn counted_from(mut self, at: Instant) -> Self {
        self.confirmed_sent_at = at;
        self
    }

    /// Until when we may act as owner without hearing from Redis again.
    pub fn deadline(&self) -> Instant {
        if self.timing.no_deadline {
            return self.confirmed_sent_at + NEVER;
        }
        self.confirmed_sent_at + self.timing.ttl - self.timing.drift
    }

    /// When the next renewal should be sent.
    pub fn renewal_due(&self) -> Instant {
        self.confirmed_sent_at + self.timing.renew_interval
    }

    /// The first loss, if any. Never cleared.
    pub fn loss(&self) -> Option<&Loss> {
        self.loss.as_ref()
    }

    /// Records a loss unless one is already recorded. Returns the first loss, and whether this
    /// call is the one that recorded it.
    pub fn lose(&mut self, reason: LossReason, checkpoint: Option<&str>, now: Instant) -> (&Loss, bool) {
        let first = self.loss.is_none();
        let after = now.saturating_duration_since(self.acquire_sent_at);
        let loss = self.loss.get_or_insert_with(|| Loss { reason, checkpoint: checkpoint.map(str::to_owned), after });
        (loss, first)
    }

    /// Local validity only: the reason to lose if the deadline has passed.
    pub fn check_deadline(&self, now: Instant) -> Option<LossReason> {
        (now >= self.deadline()).then_some(LossReason::Expired)
    }

    /// Decides on a renewal sent at `sent_at` that answered `outcome` at `now`.
    /// `ignore_failures` is the `RenewalErrorsIgnored` flaw.
    pub fn on_renewal(
        &mut self,
        sent_at: Instant,
        outcome: RenewOutcome,
        now: Instant,
        ignore_failures: bool,
    ) -> Option<LossReason> {
        let deadline = self.deadline();
        let reason = match outcome {
            RenewOutcome::Extended if sent_at < deadline && now < deadline => {
                self.confirmed_sent_at = self.confirmed_sent_at.max(sent_at);
                return None;
            }
            RenewOutcome::Extended if ignore_failures => {
                self.confirmed_sent_at = self.confirmed_sent_at.max(sent_at);
                return None;
            }
            RenewOutcome::Extended => LossReason::RenewalLate,
            RenewOutcome::NotOwner => LossReason::RenewalRejected,
            RenewOutcome::Failed(e) => LossReason::RenewalFailed(e),
        };
        if ignore_failures {
            // The flaw: pretend the lease is still valid for another ttl.
            self.confirmed_sent_at = now;
            return None;
        }
        Some(reason)
    }

    /// Decides on an owner check whose read answered `outcome` at `now`.
    pub fn on_check(&self, outcome: CheckOutcome, now: Instant) -> Option<LossReason> {
        match outcome {
            CheckOutcome::Ours => self.check_deadline(now),
            CheckOutcome::Other => Some(LossReason::HeldByOther),
            CheckOutcome::Missing => Some(LossReason::KeyMissing),
            CheckOutcome::Failed(e) => Some(LossReason::ReadError(e)),
        }
    }
}

#[cfg(test)]
mod tests;
