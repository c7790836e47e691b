//! Owner tokens: the identity of one acquisition, unique by construction.
//!
//! A token is `node/incarnation/sequence/nonce`: the node id and the incarnation the caller
//! supplies (a restarted process must bring a new one), a per-source sequence, and 64 bits from the
//! operating system drawn once per source, so even a caller that reuses an incarnation never reuses
//! a token. Tokens are never derived from a scenario seed.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::error::LeaseError;

/// The value stored in the lease key: who holds this acquisition.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OwnerToken(Arc<str>);

impl OwnerToken {
    /// Wraps a token read back from Redis or the node protocol.
    #[must_use]
    pub fn from_string(token: String) -> Self {
        Self(token.into())
    }
    /// The token as stored in Redis.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for OwnerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for OwnerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OwnerToken({})", self.0)
    }
}

/// Where acquisitions get their tokens. Handed in, so a simulation can supply its own.
pub trait TokenSource: Send + Sync + 'static {
    /// A token no other acquisition, on any node, ever had.
    fn next_token(&self) -> OwnerToken;
}

/// The production token source: node id, incarnation, a sequence and an OS nonce.
#[derive(Debug)]
pub struct UniqueTokens {
    node: String,
    incarnation: u64,
    nonce: u64,
    seq: AtomicU64,
}

impl UniqueTokens {
    /// A source for `node` in its `incarnation` (bump it on every process start).
    ///
    /// # Errors
    /// [`LeaseError::NoEntropy`] when the operating system cannot supply randomness.
    pub fn new(node: impl Into<String>, incarnation: u64) -> Result<Self, LeaseError> {
        let mut node: String = node.into();
        node.retain(|c| !c.is_whitespace() && c != '/');
        let nonce = getrandom::u64().map_err(|e| LeaseError::NoEntropy { detail: e.to_string() })?;
        Ok(Self { node, incarnation, nonce, seq: AtomicU64::new(0) })
    }
}

impl TokenSource for UniqueTokens {
    fn next_token(&self) -> OwnerToken {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        OwnerToken(format!("{}/{}/{}/{:016x}", self.node, self.incarnation, seq, self.nonce).into())
    }
}
