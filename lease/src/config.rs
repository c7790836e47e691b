//! `LeaseConfig`: every duration of the protocol, production defaults, and one `validate()`.
//!
//! Durations are `Duration` in code; scenarios and the node protocol carry them as `*_ms`.
//! This module decides nothing at run time; it only says which combinations are sane.

use std::time::Duration;

use crate::error::LeaseError;
use crate::flaw::Flaw;

/// Production default: how long a lease lives without renewal.
pub const DEFAULT_TTL: Duration = Duration::from_millis(120_000);
/// Production default: how long `acquire` keeps trying while another node holds the lease.
pub const DEFAULT_ACQUIRE_WAIT: Duration = Duration::from_millis(30_000);

/// Redis checks `WAIT` timeouts in its 10 Hz cron, so a `WAIT` may answer this much after its own
/// timeout; the client waits that long before calling it unanswered.
pub(crate) const WAIT_SLACK: std::time::Duration = std::time::Duration::from_millis(250);

/// After a renewal or acquire returns, Redis may also see it replicated before it counts.
///
/// Redis failover drops writes that did not reach the replica; with this guard the node sends
/// `WAIT replicas timeout` on the same connection right after the write, and a lease that the
/// replicas did not acknowledge counts as not held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicationGuard {
    /// How many replicas must acknowledge.
    pub replicas: u32,
    /// How long `WAIT` may block.
    pub timeout: Duration,
}

/// The lease protocol's timings and options. Build with [`LeaseConfig::default`] (production) or
/// [`LeaseConfig::scaled`] (the same ratios around a shorter ttl), then `with_*`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct LeaseConfig {
    pub(crate) ttl: Duration,
    pub(crate) renew_interval: Duration,
    pub(crate) acquire_wait: Duration,
    pub(crate) retry_min: Duration,
    pub(crate) retry_max: Duration,
    pub(crate) command_timeout: Duration,
    pub(crate) drift: Option<Duration>,
    pub(crate) key_prefix: String,
    pub(crate) replication: Option<ReplicationGuard>,
    pub(crate) flaw: Option<Flaw>,
}

impl Default for LeaseConfig {
    /// The production values: ttl 120 s, renew every 40 s, acquire wait 30 s.
    fn default() -> Self {
        Self::scaled(DEFAULT_TTL)
    }
}

impl LeaseConfig {
    /// The production ratios around `ttl`: renew every ttl/3, acquire wait ttl/4, retries between
    /// ttl/2400 and ttl/240 (50 ms and 500 ms in production), command timeout ttl/60 clamped to
    /// 50 ms..=2 s.
    pub fn scaled(ttl: Duration) -> Self {
        let command_timeout = (ttl / 60).clamp(Duration::from_millis(50), Duration::from_secs(2));
        Self {
            ttl,
            renew_interval: ttl / 3,
            acquire_wait: ttl / 4,
            retry_min: (ttl / 2400).max(Duration::from_millis(1)),
            retry_max: (ttl / 240).max(Duration::from_millis(2)),
            command_timeout,
            drift: None,
            key_prefix: "leasequake".to_owned(),
            replication: None,
            flaw: None,
        }
    }

    /// How long a lease lives in Redis without renewal.
    pub fn with_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }
    /// How often the renewal task extends the lease (must be below the ttl).
    pub fn with_renew_interval(mut self, every: Duration) -> Self {
        self.renew_interval = every;
        self
    }
    /// How long `acquire` keeps retrying before it returns [`LeaseError::AcquireTimeout`].
    pub fn with_acquire_wait(mut self, wait: Duration) -> Self {
        self.acquire_wait = wait;
        self
    }
    /// Bounds of the jittered pause between acquire attempts.
    pub fn with_retry(mut self, min: Duration, max: Duration) -> Self {
        self.retry_min = min;
        self.retry_max = max;
        self
    }
    /// The timeout on every single Redis command.
    pub fn with_command_timeout(mut self, timeout: Duration) -> Self {
        self.command_timeout = timeout;
        self
    }
    /// The clock-drift margin taken off the lease's local validity (default ttl/100 + 2 ms).
    pub fn with_drift_margin(mut self, margin: Duration) -> Self {
        self.drift = Some(margin);
        self
    }
    /// The prefix of the Redis keys: `{prefix}:{{tenant}}:lease` and `{prefix}:{{tenant}}:fence`.
    pub fn with_key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.key_prefix = prefix.into();
        self
    }
    /// Require replica acknowledgement (`WAIT`) of every acquire and renewal. Off by default.
    pub fn with_replication_guard(mut self, guard: ReplicationGuard) -> Self {
        self.replication = Some(guard);
        self
    }

    /// Select a known-bad protocol variant. Exists only in builds with the `flaws` feature.
    #[cfg(feature = "flaws")]
    pub fn with_flaw(mut self, flaw: Flaw) -> Self {
        self.flaw = Some(flaw);
        self
    }

    /// The ttl.
    #[must_use]
    pub fn ttl(&self) -> Duration {
        self.ttl
    }
    /// The renewal interval, as the protocol will use it.
    #[must_use]
    pub fn renew_interval(&self) -> Duration {
        if crate::flaw::is(self.flaw, Flaw::RenewIntervalEqualsTtl) {
            return self.ttl;
        }
        self.renew_interval
    }
    /// The acquire wait.
    #[must_use]
    pub fn acquire_wait(&self) -> Duration {
        self.acquire_wait
    }
    /// The per-command timeout.
    #[must_use]
    pub fn command_timeout(&self) -> Duration {
        self.command_timeout
    }
    /// The drift margin in force.
    #[must_use]
    pub fn drift_margin(&self) -> Duration {
        self.drift.unwrap_or(self.ttl / 100 + Duration::from_millis(2))
    }
    /// The selected flaw, if this is a self-test build that selected one.
    #[must_use]
    pub fn flaw(&self) -> Option<Flaw> {
        self.flaw
    }

    /// Rejects combinations the protocol cannot run safely with, naming the field.
    pub fn validate(&self) -> Result<(), LeaseError> {
        let bad = |field, reason: String| Err(LeaseError::InvalidConfig { field, reason });
        for (field, value) in [
            ("ttl", self.ttl),
            ("renew_interval", self.renew_interval),
            ("acquire_wait", self.acquire_wait),
            ("retry_min", self.retry_min),
            ("command_timeout", self.command_timeout),
        ] {
            if value.is_zero() {
                return bad(field, "must be greater than zero".into());
            }
        }
        if self.ttl.as_millis() > u128::from(u32::MAX) {
            return bad("ttl", format!("{:?} is too long (at most {} ms)", self.ttl, u32::MAX));
        }
        if self.ttl.subsec_nanos() % 1_000_000 != 0 {
            return bad("ttl", format!("{:?} must be a whole number of milliseconds", self.ttl));
        }
        if self.renew_interval >= self.ttl {
            return bad(
                "renew_interval",
                format!(
                    "{:?} must be shorter than the ttl {:?} (production uses ttl/3)",
                    self.renew_interval, self.ttl
                ),
            );
        }
        if self.retry_max < self.retry_min {
            return bad("retry_max", format!("{:?} is below retry_min {:?}", self.retry_max, self.retry_min));
        }
        if self.drift_margin() >= self.ttl - self.renew_interval {
            return bad(
                "drift_margin",
                format!("{:?} leaves no time between a renewal and the lease's end", self.drift_margin()),
            );
        }
        if self.command_timeout >= self.ttl {
            return bad(
                "command_timeout",
                format!("{:?} must be shorter than the ttl {:?}", self.command_timeout, self.ttl),
            );
        }
        if self.key_prefix.is_empty() || self.key_prefix.contains(['{', '}']) {
            return bad("key_prefix", format!("{:?} must be non-empty and free of braces", self.key_prefix));
        }
        if let Some(r) = self.replication {
            if r.replicas == 0 {
                return bad("replication.replicas", "must be at least 1 (or leave the guard off)".into());
            }
            if r.timeout.is_zero() || r.timeout >= self.command_timeout {
                // WAIT blocks its connection: a longer WAIT would make every command queued behind
                // it (checkpoints, renewals) time out.
                return bad(
                    "replication.timeout",
                    format!(
                        "{:?} must be above zero and below the command timeout {:?}",
                        r.timeout, self.command_timeout
                    ),
                );
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
