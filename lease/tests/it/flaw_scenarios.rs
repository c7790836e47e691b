//! One scenario per flaw. Each takes the lease configuration (with or without the flaw selected)
//! and answers whether the flaw's deviation was observed. `flaw_controls` runs them on the
//! correct build and expects `false`; `flaws` selects each flaw and expects `true`.

use std::time::Duration;

use redis_lease::{LeaseConfig, LeaseError, LeaseGuard};

use crate::protocol::{holder, pttl, put, TTL};
use crate::redis_server::{eventually, kill_other_clients, RedisServer};

/// Puts a successor's token (ttl 50 s) in the key, then waits until `guard` attempts a renewal.
async fn hand_over_and_wait_for_a_renewal(
    guard: &LeaseGuard<redis::aio::MultiplexedConnection>,
    admin: &mut redis::aio::MultiplexedConnection,
) {
    let before = guard.counters();
    put(admin, "t", "successor", 50_000).await;
    let attempted = eventually(TTL * 2, async || {
        let c = guard.counters();
        c.renewals + c.renewal_failures > before.renewals + before.renewal_failures
    })
    .await;
    assert!(attempted, "no renewal attempt within two ttls");
}

/// Did a stale guard's renewal extend its successor's key?
pub async fn stale_renewal_extends_successor(config: LeaseConfig) -> bool {
    let redis = RedisServer::start().unwrap();
    let mut admin = redis.conn().await;
    let stale = redis.client("a", config).await.acquire("t").await.unwrap();
    hand_over_and_wait_for_a_renewal(&stale, &mut admin).await;
    // Our renewal would set the ttl to 600 ms; the successor's is 50 s.
    pttl(&mut admin, "t").await <= TTL.as_millis() as i64
}

/// Did a stale guard's release delete its successor's key?
pub async fn stale_release_deletes_successor(config: LeaseConfig) -> bool {
    let redis = RedisServer::start().unwrap();
    let mut admin = redis.conn().await;
    let stale = redis.client("a", config).await.acquire("t").await.unwrap();
    put(&mut admin, "t", "successor", 50_000).await;
    let _ = stale.release().await;
    holder(&mut admin, "t").await.is_none()
}

/// After a checkpoint saw the loss, does our own token coming back make the guard writable again?
pub async fn lost_guard_becomes_writable_again(config: LeaseConfig) -> bool {
    let redis = RedisServer::start().unwrap();
    let mut admin = redis.conn().await;
    let guard = redis.client("a", config).await.acquire("t").await.unwrap();
    put(&mut admin, "t", "other", 50_000).await;
    assert!(guard.ensure_owned("first").await.is_err(), "the overwrite must be seen");
    put(&mut admin, "t", guard.token().as_str(), 50_000).await;
    guard.ensure_owned("second").await.is_ok()
}

/// Does a second node acquire while the first still holds the lease?
pub async fn second_acquire_overwrites_holder(config: LeaseConfig) -> bool {
    let redis = RedisServer::start().unwrap();
    let first = redis.client("a", config.clone()).await.acquire("t").await.unwrap();
    let second = redis.client("b", config).await.acquire("t").await;
    let overwritten = matches!(&second, Ok(g) if g.token() != first.token());
    assert!(overwritten || matches!(second, Err(LeaseError::AcquireTimeout { .. })));
    overwritten
}

/// Does the key expire between renewals while the holder never released it?
pub async fn key_expires_between_renewals(config: LeaseConfig) -> bool {
    let redis = RedisServer::start().unwrap();
    let mut admin = redis.conn().await;
    let guard = redis.client("a", config).await.acquire("t").await.unwrap();
    // Either three renewals happen (a full ttl of renewals at ttl/3), or the key vanishes first.
    let mut gone = false;
    let settled = eventually(TTL * 3, async || {
        gone = holder(&mut admin, "t").await.is_none();
        gone || guard.counters().renewals >= 3
    })
    .await;
    assert!(settled, "neither three renewals nor an expiry within three ttls");
    gone
}

/// After the key is taken over, does a renewal that was rejected go unreported?
pub async fn rejected_renewal_goes_unreported(config: LeaseConfig) -> bool {
    let redis = RedisServer::start().unwrap();
    let mut admin = redis.conn().await;
    let guard = redis.client("a", config).await.acquire("t").await.unwrap();
    hand_over_and_wait_for_a_renewal(&guard, &mut admin).await;
    guard.loss().is_none()
}

/// After the connection is killed (and re-made by the connection manager), does the key expire
/// while the guard has not reported any loss?
pub async fn renewal_dies_silently_after_reconnect(config: LeaseConfig) -> bool {
    let redis = RedisServer::start().unwrap();
    let mut admin = redis.conn().await;
    let tokens = redis_lease::UniqueTokens::new("a", 1).unwrap();
    let client = redis_lease::LeaseClient::new(redis.manager().await, config, tokens).unwrap();
    let guard = client.acquire("t").await.unwrap();
    kill_other_clients(&mut admin).await;
    // Within two ttls: the key expired (renewal stopped) or the loss was reported, or renewal
    // carried on over the new connection (neither happens and the key is still ours).
    let mut expired = false;
    let _ = eventually(Duration::from_millis(2 * TTL.as_millis() as u64), async || {
        expired = holder(&mut admin, "t").await.is_none();
        expired || guard.loss().is_some()
    })
    .await;
    expired && guard.loss().is_none()
}

/// Does the guard count its validity from the acquire's reply rather than its send (a deadline
/// later than the send plus the ttl less the drift margin)?
pub async fn validity_counts_from_the_reply(config: LeaseConfig) -> bool {
    let redis = RedisServer::start().unwrap();
    let (ttl, drift) = (config.ttl(), config.drift_margin());
    let guard = redis.client("a", config).await.acquire("t").await.unwrap();
    guard.valid_until() > guard.acquire_sent_at() + ttl - drift
}

/// Does the guard go on past its ttl with no local deadline (its deadline beyond the ttl)?
pub async fn no_deadline_past_the_ttl(config: LeaseConfig) -> bool {
    let redis = RedisServer::start().unwrap();
    let ttl = config.ttl();
    let guard = redis.client("a", config).await.acquire("t").await.unwrap();
    guard.valid_until() > guard.acquire_sent_at() + ttl
}
