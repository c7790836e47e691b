//! The protocol's Redis I/O: each Lua script wrapped once in `redis::Script`, and one typed call
//! per operation. Generic over redis-rs's async `ConnectionLike`, so a model of Redis can stand
//! under the same calls. Decides nothing: outcomes go back to `ownership`.
//!
//! Use a single-connection handle (a `MultiplexedConnection` or a `ConnectionManager`), not a
//! pool: the replication guard's `WAIT` must follow the write on the same connection.

use std::sync::LazyLock;

use redis::aio::ConnectionLike;
use redis::{RedisResult, Script};

use crate::flaw::Flaw;
use crate::token::OwnerToken;

static ACQUIRE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("lua/acquire.lua")));
static RENEW: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("lua/renew.lua")));
static RELEASE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("lua/release.lua")));

#[cfg(feature = "flaws")]
mod flawed {
    use super::{LazyLock, Script};
    pub static ACQUIRE: LazyLock<Script> =
        LazyLock::new(|| Script::new(include_str!("lua/flaws/acquire_without_nx.lua")));
    pub static RENEW: LazyLock<Script> =
        LazyLock::new(|| Script::new(include_str!("lua/flaws/renew_without_compare.lua")));
    pub static RELEASE: LazyLock<Script> =
        LazyLock::new(|| Script::new(include_str!("lua/flaws/release_without_compare.lua")));
}

/// Picks the flawed script in self-test builds that selected `f`, the correct one otherwise.
fn pick(correct: &'static LazyLock<Script>, selected: Option<Flaw>, f: Flaw) -> &'static Script {
    #[cfg(feature = "flaws")]
    if crate::flaw::is(selected, f) {
        return match f {
            Flaw::AcquireWithoutNx => &flawed::ACQUIRE,
            Flaw::RenewWithoutOwnerCompare => &flawed::RENEW,
            Flaw::ReleaseWithoutOwnerCompare => &flawed::RELEASE,
            _ => correct,
        };
    }
    #[cfg(not(feature = "flaws"))]
    let _ = (selected, f);
    correct
}

/// The two keys of one tenant's lease. Both carry the `{tenant}` hash tag.
#[derive(Debug, Clone)]
pub struct LeaseKeys {
    /// Holds the owner token, with the lease's TTL.
    pub lease: String,
    /// The per-tenant fence counter, `INCR`ed by every successful acquire. No TTL.
    pub fence: String,
}

impl LeaseKeys {
    /// The keys of `tenant` under `prefix`.
    #[must_use]
    pub fn new(prefix: &str, tenant: &str) -> Self {
        Self { lease: format!("{prefix}:{{{tenant}}}:lease"), fence: format!("{prefix}:{{{tenant}}}:fence") }
    }
}

/// What the acquire script answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AcquireReply {
    /// We hold the lease; this is our fence.
    Acquired { fence: u64 },
    /// Someone else holds it, for this many more ms (`None`: no expiry or unknown).
    Held { pttl_ms: Option<u64> },
}

/// Typed calls on one connection handle.
#[derive(Clone)]
pub(crate) struct RedisOps<C> {
    conn: C,
    flaw: Option<Flaw>,
}

impl<C: ConnectionLike + Clone + Send + Sync + 'static> RedisOps<C> {
    pub fn new(conn: C, flaw: Option<Flaw>) -> Self {
        Self { conn, flaw }
    }

    pub async fn acquire(&self, keys: &LeaseKeys, token: &OwnerToken, ttl_ms: u64) -> RedisResult<AcquireReply> {
        let (won, value): (i64, i64) = pick(&ACQUIRE, self.flaw, Flaw::AcquireWithoutNx)
            .key(&keys.lease)
            .key(&keys.fence)
            .arg(token.as_str())
            .arg(ttl_ms)
            .invoke_async(&mut self.conn.clone())
            .await?;
        Ok(if won == 1 {
            AcquireReply::Acquired { fence: u64::try_from(value).unwrap_or(0) }
        } else {
            AcquireReply::Held { pttl_ms: u64::try_from(value).ok() }
        })
    }

    pub async fn renew(&self, keys: &LeaseKeys, token: &OwnerToken, ttl_ms: u64) -> RedisResult<bool> {
        let extended: i64 = pick(&RENEW, self.flaw, Flaw::RenewWithoutOwnerCompare)
            .key(&keys.lease)
            .arg(token.as_str())
            .arg(ttl_ms)
            .invoke_async(&mut self.conn.clone())
            .await?;
        Ok(extended == 1)
    }

    pub async fn release(&self, keys: &LeaseKeys, token: &OwnerToken) -> RedisResult<bool> {
        let deleted: i64 = pick(&RELEASE, self.flaw, Flaw::ReleaseWithoutOwnerCompare)
            .key(&keys.lease)
            .arg(token.as_str())
            .invoke_async(&mut self.conn.clone())
            .await?;
        Ok(deleted == 1)
    }

    /// The token the lease key holds now, if any.
    pub async fn owner(&self, keys: &LeaseKeys) -> RedisResult<Option<String>> {
        redis::cmd("GET").arg(&keys.lease).query_async(&mut self.conn.clone()).await
    }

    /// `WAIT replicas timeout_ms`: how many replicas acknowledged our writes so far.
    pub async fn wait_replicas(&self, replicas: u32, timeout_ms: u64) -> RedisResult<u64> {
        redis::cmd("WAIT").arg(replicas).arg(timeout_ms).query_async(&mut self.conn.clone()).await
    }
}
