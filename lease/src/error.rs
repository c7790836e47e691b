//! The one error type of the crate, and how a caller should read it.
//!
//! Ownership loss is *not* an error variant of its own kind of failure: it is `Lost`, carrying the
//! sticky [`Loss`] record, so a caller can tell "we are no longer the owner" apart from "Redis did
//! not answer" without parsing messages.

use std::time::Duration;

use crate::ownership::Loss;

/// Everything that can go wrong in this crate.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// A [`LeaseConfig`](crate::LeaseConfig) field has a value the protocol cannot run with.
    #[error("invalid lease configuration: `{field}` {reason}")]
    InvalidConfig {
        /// The offending field, as named in `LeaseConfig`'s builder (`ttl`, `renew_interval`, ...).
        field: &'static str,
        /// What is wrong with it, and what would be right.
        reason: String,
    },
    /// The acquire wait ran out while someone else held the lease (or Redis kept failing).
    #[error(
        "could not acquire the lease of tenant `{tenant}` within {waited_ms} ms after {attempts} attempts{}{}",
        holder_ttl_ms.map(|t| format!("; the holder's lease has {t} ms left")).unwrap_or_default(),
        last_error.as_ref().map(|e| format!("; last Redis error: {e}")).unwrap_or_default()
    )]
    AcquireTimeout {
        /// The tenant whose lease was asked for.
        tenant: String,
        /// How long we tried.
        waited_ms: u64,
        /// How many acquire scripts were sent.
        attempts: u32,
        /// The remaining TTL of the holder at the last attempt, when one was seen.
        holder_ttl_ms: Option<u64>,
        /// The last Redis error, when the last attempts failed rather than found a holder.
        last_error: Option<String>,
    },
    /// Ownership is lost, for good: the first failed owner check, read error or failed renewal
    /// decided it, and every later checkpoint answers this without touching Redis.
    #[error("lease of tenant `{tenant}` lost: {loss}")]
    Lost {
        /// The tenant whose lease was lost.
        tenant: String,
        /// The sticky record of the first loss.
        loss: Loss,
    },
    /// A command timed out or its connection dropped after it was sent: it MAY have been applied.
    /// Record such an outcome as unknown, never as a failure.
    #[error("outcome of `{op}` unknown after {elapsed:?}: {detail}")]
    Indeterminate {
        /// The operation (`acquire`, `renew`, `release`, `check`).
        op: &'static str,
        /// How long we waited.
        elapsed: Duration,
        /// What happened (a timeout or the Redis error).
        detail: String,
    },
    /// The operating system could not supply randomness for an owner token's nonce.
    #[error("no randomness from the operating system for owner tokens: {detail}")]
    NoEntropy {
        /// The operating system's error.
        detail: String,
    },
    /// Redis refused or failed a command in a way that means it was not applied.
    #[error("redis error during `{op}`: {source}")]
    Redis {
        /// The operation (`acquire`, `renew`, `release`, `check`).
        op: &'static str,
        /// The underlying error.
        #[source]
        source: redis::RedisError,
    },
}

impl LeaseError {
    /// Whether this error means ownership was lost (as opposed to any other failure).
    #[must_use]
    pub fn is_lost(&self) -> bool {
        matches!(self, LeaseError::Lost { .. })
    }

    /// Classifies a Redis error: after a send, a timeout or dropped connection leaves the outcome
    /// unknown; anything else (refused connection, script error, auth) was not applied.
    pub(crate) fn from_redis(op: &'static str, elapsed: Duration, source: redis::RedisError) -> Self {
        if source.is_timeout()
            || source.is_connection_dropped()
            || (source.is_io_error() && !source.is_connection_refusal())
        {
            LeaseError::Indeterminate { op, elapsed, detail: source.to_string() }
        } else {
            LeaseError::Redis { op, source }
        }
    }
}
