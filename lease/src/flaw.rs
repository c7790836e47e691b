//! Known-bad variants of the protocol, each one documented deviation standing for a real bug.
//!
//! They exist so the harness can prove that its checks fail on a bad implementation. The enum is
//! public only with the `flaws` feature, and only `LeaseConfig::with_flaw` (also behind the
//! feature) can select one: a default build carries the type privately, always `None`, and every
//! `is(..)` test below is a constant `false` the compiler removes.

/// One deviation from the protocol. See each variant for the real-world bug it stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(not(feature = "flaws"), allow(dead_code))]
pub enum Flaw {
    /// Renewal runs `PEXPIRE` without comparing the owner token, so a stale node extends its
    /// successor's lease (the classic "check-less refresh").
    RenewWithoutOwnerCompare,
    /// Release runs `DEL` without comparing the owner token, so a late node deletes its successor's
    /// lease (the bug the Redis docs warn about for `SET NX` + `DEL`).
    ReleaseWithoutOwnerCompare,
    /// Loss is not sticky: a checkpoint re-reads Redis and, seeing the same token again (after a
    /// failover restored an old value, say), lets the node write again.
    NonStickyLoss,
    /// Acquire uses `SET` without `NX`, overwriting whoever holds the lease.
    AcquireWithoutNx,
    /// The renewal interval equals the ttl: the key expires between renewals under any delay.
    RenewIntervalEqualsTtl,
    /// Renewal failures and mismatches are logged and ignored; ownership is never marked lost.
    RenewalErrorsIgnored,
    /// After the first connection error, the renewal task stops for good without marking the lease
    /// lost (as reported against a widely used Java lock library's watchdog after a reconnect).
    RenewalStopsAfterReconnect,
    /// Validity is counted from when the acquire's or renewal's reply arrived, not from when it was
    /// sent: a slow reply silently extends the lease past the key's expiry in Redis.
    ValidityFromReply,
    /// No local validity deadline: only Redis's answers (a check, a renewal) end ownership, so a
    /// stalled renewal lets the node work on past the ttl until its next owner check.
    NoLocalDeadline,
}

impl Flaw {
    /// Every flaw, in catalogue order.
    pub const ALL: [Flaw; 9] = [
        Flaw::RenewWithoutOwnerCompare,
        Flaw::ReleaseWithoutOwnerCompare,
        Flaw::NonStickyLoss,
        Flaw::AcquireWithoutNx,
        Flaw::RenewIntervalEqualsTtl,
        Flaw::RenewalErrorsIgnored,
        Flaw::RenewalStopsAfterReconnect,
        Flaw::ValidityFromReply,
        Flaw::NoLocalDeadline,
    ];

    /// The flaw's stable kebab-case name (used on command lines and in reports).
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Flaw::RenewWithoutOwnerCompare => "renew-without-owner-compare",
            Flaw::ReleaseWithoutOwnerCompare => "release-without-owner-compare",
            Flaw::NonStickyLoss => "non-sticky-loss",
            Flaw::AcquireWithoutNx => "acquire-without-nx",
            Flaw::RenewIntervalEqualsTtl => "renew-interval-equals-ttl",
            Flaw::RenewalErrorsIgnored => "renewal-errors-ignored",
            Flaw::RenewalStopsAfterReconnect => "renewal-stops-after-reconnect",
            Flaw::ValidityFromReply => "validity-from-reply",
            Flaw::NoLocalDeadline => "no-local-deadline",
        }
    }

    /// Parses [`Flaw::name`].
    #[must_use]
    pub fn from_name(name: &str) -> Option<Flaw> {
        Flaw::ALL.into_iter().find(|f| f.name() == name)
    }
}

/// Whether `flaw` is selected. A constant `false` in builds without the `flaws` feature.
#[inline]
pub(crate) fn is(selected: Option<Flaw>, flaw: Flaw) -> bool {
    cfg!(feature = "flaws") && selected == Some(flaw)
}
