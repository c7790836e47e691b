//! Each protocol rule, on a real `redis-server`.

use std::time::Duration;

use redis::AsyncCommands;
use redis_lease::{
    LeaseClient, LeaseConfig, LeaseError, LeaseKeys, LossReason, Released, ReplicationGuard, UniqueTokens,
};

use crate::redis_server::{eventually, kill_other_clients, RedisServer};

pub const TTL: Duration = Duration::from_millis(600);

pub fn config() -> LeaseConfig {
    LeaseConfig::scaled(TTL)
}

pub fn keys(tenant: &str) -> LeaseKeys {
    LeaseKeys::new("leasequake", tenant)
}

pub async fn holder(conn: &mut redis::aio::MultiplexedConnection, tenant: &str) -> Option<String> {
    conn.get(keys(tenant).lease).await.unwrap()
}

pub async fn pttl(conn: &mut redis::aio::MultiplexedConnection, tenant: &str) -> i64 {
    conn.pttl(keys(tenant).lease).await.unwrap()
}

pub async fn put(conn: &mut redis::aio::MultiplexedConnection, tenant: &str, token: &str, ttl_ms: u64) {
    let _: () =
        redis::cmd("SET").arg(keys(tenant).lease).arg(token).arg("PX").arg(ttl_ms).query_async(conn).await.unwrap();
}

#[tokio::test]
async fn ownership_loss_is_sticky_and_cancels_every_later_checkpoint() {
    let redis = RedisServer::start().unwrap();
    let mut admin = redis.conn().await;
    let a = redis.client("a", config()).await;
    let guard = a.acquire("t1").await.unwrap();
    guard.ensure_owned("after-prepare").await.unwrap();
    guard.ensure_owned("between-batches").await.unwrap();

    // Someone else's token lands in the key (a failover, an operator, a flaw elsewhere).
    put(&mut admin, "t1", "intruder", 10_000).await;
    let err = guard.ensure_owned("before-create").await.unwrap_err();
    let LeaseError::Lost { loss, .. } = &err else { panic!("expected Lost, got {err:?}") };
    assert_eq!(loss.reason, LossReason::HeldByOther);
    assert_eq!(loss.checkpoint.as_deref(), Some("before-create"));
    assert!(guard.lost_token().is_cancelled());

    // Our own token back in Redis changes nothing: the loss is for good.
    put(&mut admin, "t1", guard.token().as_str(), 10_000).await;
    for checkpoint in ["after-create", "before-switch", "after-switch", "before-persist"] {
        let err = guard.ensure_owned(checkpoint).await.unwrap_err();
        let LeaseError::Lost { loss, .. } = err else { panic!("expected Lost") };
        assert_eq!(loss.reason, LossReason::HeldByOther, "the first reason is kept");
    }
    let counters = guard.counters();
    assert_eq!(counters.checks_passed, 2);
    assert_eq!(counters.loss_cancellations, 5);
}

#[tokio::test]
async fn renewal_keeps_the_key_alive_well_past_ttl() {
    let redis = RedisServer::start().unwrap();
    let mut admin = redis.conn().await;
    let guard = redis.client("a", config()).await.acquire("t1").await.unwrap();
    // Observe six renewals in Redis (each one raises the key's PTTL): two ttls' worth.
    let mut last = pttl(&mut admin, "t1").await;
    for _ in 0..6 {
        let renewed = eventually(TTL, async || {
            let now = pttl(&mut admin, "t1").await;
            let up = now > last;
            last = now;
            up
        })
        .await;
        assert!(renewed, "no renewal seen within a ttl");
    }
    assert_eq!(holder(&mut admin, "t1").await.as_deref(), Some(guard.token().as_str()));
    assert!(guard.loss().is_none());
    guard.ensure_owned("after-two-ttls").await.unwrap();
    assert!(guard.counters().renewals >= 6);
}

#[tokio::test]
async fn stale_guard_can_neither_renew_nor_release_its_successors_key() {
    let redis = RedisServer::start().unwrap();
    let mut admin = redis.conn().await;
    let a = redis.client("a", config()).await;
    let stale = a.acquire("t1").await.unwrap();
    // The key passes to a successor behind our back, with a ttl far from ours.
    put(&mut admin, "t1", "successor", 50_000).await;
    let loss = tokio::time::timeout(TTL * 2, stale.lost()).await.unwrap();
    assert_eq!(loss.reason, LossReason::RenewalRejected);
    let left = pttl(&mut admin, "t1").await;
    assert!(left > 40_000, "the successor's ttl was not touched: {left} ms left");
    assert_eq!(stale.release().await.unwrap(), Released::NotOwner);
    assert_eq!(holder(&mut admin, "t1").await.as_deref(), Some("successor"));
}

#[tokio::test]
async fn acquire_times_out_with_the_typed_error() {
    let redis = RedisServer::start().unwrap();
    let a = redis.client("a", config()).await;
    let b = redis.client("b", config()).await;
    let _held = a.acquire("t1").await.unwrap();
    let err = b.acquire("t1").await.err().unwrap();
    let LeaseError::AcquireTimeout { tenant, holder_ttl_ms, attempts, .. } = &err else { panic!("got {err:?}") };
    assert_eq!(tenant, "t1");
    assert!(attempts > &1);
    let ttl = holder_ttl_ms.unwrap();
    assert!(ttl > 0 && ttl <= 600, "holder ttl {ttl}");
    let msg = err.to_string();
    assert!(msg.contains("`t1`") && msg.contains("ms left"), "{msg}");
}

#[tokio::test]
async fn fences_strictly_increase_across_owners() {
    let redis = RedisServer::start().unwrap();
    let nodes =
        [redis.client("a", config()).await, redis.client("b", config()).await, redis.client("c", config()).await];
    let mut fences = Vec::new();
    let mut tokens = std::collections::BTreeSet::new();
    for round in 0..9 {
        let guard = nodes[round % 3].acquire("t1").await.unwrap();
        fences.push(guard.fence());
        assert!(tokens.insert(guard.token().clone()), "owner tokens are unique");
        assert_eq!(guard.release().await.unwrap(), Released::Deleted);
    }
    assert!(fences.windows(2).all(|w| w[0] < w[1]), "{fences:?}");
}

#[tokio::test]
async fn killing_the_connection_marks_loss() {
    let redis = RedisServer::start().unwrap();
    let mut admin = redis.conn().await;
    let guard = redis.client("a", config()).await.acquire("t1").await.unwrap();
    kill_other_clients(&mut admin).await;
    let loss = tokio::time::timeout(TTL * 2, guard.lost()).await.unwrap();
    assert_eq!(loss.reason.kind(), "renewal_failed", "{loss}");
    assert!(guard.ensure_owned("after-kill").await.unwrap_err().is_lost());
}

#[tokio::test]
async fn restarting_redis_marks_loss() {
    let mut redis = RedisServer::start().unwrap();
    let a = redis.client("a", config()).await;
    let guard = a.acquire("t1").await.unwrap();
    let fence = guard.fence();
    redis.restart().unwrap();
    let loss = tokio::time::timeout(TTL * 2, guard.lost()).await.unwrap();
    assert_eq!(loss.reason.kind(), "renewal_failed", "{loss}");
    // Without persistence the fence counter is gone too: a new owner gets fence 1 again.
    let b = redis.client("b", config()).await;
    let next = b.acquire("t1").await.unwrap();
    assert_eq!((fence, next.fence()), (1, 1), "fences repeat after a restart without persistence");
}

#[tokio::test]
async fn release_is_idempotent() {
    let redis = RedisServer::start().unwrap();
    let mut admin = redis.conn().await;
    let guard = redis.client("a", config()).await.acquire("t1").await.unwrap();
    assert_eq!(guard.release().await.unwrap(), Released::Deleted);
    assert_eq!(guard.release().await.unwrap(), Released::AlreadyReleased);
    assert_eq!(holder(&mut admin, "t1").await, None);
    let err = guard.ensure_owned("after-release").await.unwrap_err();
    let LeaseError::Lost { loss, .. } = err else { panic!() };
    assert_eq!(loss.reason, LossReason::Released);
    // A successor's key survives a second release of the old guard too.
    let next = redis.client("b", config()).await.acquire("t1").await.unwrap();
    assert_eq!(guard.release().await.unwrap(), Released::AlreadyReleased);
    assert_eq!(holder(&mut admin, "t1").await.as_deref(), Some(next.token().as_str()));
}

#[tokio::test]
async fn a_stalled_renewal_thread_expires_the_lease_locally_before_redis_does() {
    // The production incident: the renewal thread pauses while the pipeline runs on.
    let redis = RedisServer::start().unwrap();
    let mut admin = redis.conn().await;
    let renewal_rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let handle = renewal_rt.handle().clone();
    let (stall_tx, stall_rx) = std::sync::mpsc::channel::<()>();
    // The renewal runtime is never driven: its thread is stalled until the test ends.
    let thread = std::thread::spawn(move || {
        let _ = stall_rx.recv();
        drop(renewal_rt);
    });
    let client = LeaseClient::new(redis.conn().await, config(), UniqueTokens::new("a", 1).unwrap())
        .unwrap()
        .with_spawner(handle);
    let guard = client.acquire("t1").await.unwrap();
    guard.ensure_owned("after-prepare").await.unwrap();
    let loss = tokio::time::timeout(TTL * 2, guard.lost()).await.unwrap();
    assert_eq!(loss.reason, LossReason::Expired);
    assert!(guard.ensure_owned("between-batches").await.unwrap_err().is_lost());
    assert_eq!(guard.counters().renewals, 0, "the stalled thread never renewed");
    let _ = holder(&mut admin, "t1").await;
    let _ = stall_tx.send(());
    thread.join().unwrap();
}

#[tokio::test]
async fn replication_guard_requires_the_replica_to_acknowledge() {
    // Without `repl-diskless-sync-delay 0` the first sync waits 5 s.
    let primary = RedisServer::start_with(&["--repl-diskless-sync-delay", "0"]).unwrap();
    let replica_of = primary.port().to_string();
    let replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &replica_of]).unwrap();
    // Generous timings: a loaded CI machine can take well over 100 ms to answer WAIT. A blocked
    // WAIT holds up every later command on its connection, hence a command timeout above it;
    // redis-rs gives up on any answer after 500 ms by default, hence a WAIT below that.
    let guard_cfg = || {
        LeaseConfig::scaled(Duration::from_secs(6))
            .with_command_timeout(Duration::from_millis(1500))
            .with_replication_guard(ReplicationGuard { replicas: 1, timeout: Duration::from_millis(300) })
    };

    let mut rconn = replica.conn().await;
    assert!(
        eventually(Duration::from_secs(5), async || {
            let info: String = redis::cmd("INFO").arg("replication").query_async(&mut rconn).await.unwrap();
            info.contains("master_link_status:up")
        })
        .await,
        "replica never linked"
    );
    let a = primary.client("a", guard_cfg()).await;
    let guard = a.acquire("t1").await.unwrap();
    assert_eq!(holder(&mut rconn, "t1").await.as_deref(), Some(guard.token().as_str()));
    guard.release().await.unwrap();

    // Without the replica, the same acquire never counts as held.
    drop(replica);
    let err = a.acquire("t2").await.err().unwrap();
    let LeaseError::AcquireTimeout { last_error, .. } = &err else { panic!("{err:?}") };
    assert!(last_error.as_deref().unwrap_or("").contains("replicas acknowledged"), "{err}");
    let mut admin = primary.conn().await;
    assert_eq!(holder(&mut admin, "t2").await, None, "an unreplicated acquire is given back");
}

#[tokio::test]
async fn invalid_config_is_rejected_at_construction() {
    let redis = RedisServer::start().unwrap();
    let bad = config().with_renew_interval(TTL);
    let err = LeaseClient::new(redis.conn().await, bad, UniqueTokens::new("a", 1).unwrap()).err().unwrap();
    assert!(matches!(err, LeaseError::InvalidConfig { field: "renew_interval", .. }), "{err}");
}

#[tokio::test]
async fn the_observer_hears_renewals_and_the_loss_exactly_once() {
    let redis = RedisServer::start().unwrap();
    let mut admin = redis.conn().await;
    let heard = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = heard.clone();
    let client = LeaseClient::new(redis.conn().await, config(), UniqueTokens::new("a", 1).unwrap())
        .unwrap()
        .with_observer(move |e: &redis_lease::LeaseEvent| sink.lock().unwrap().push(e.clone()));
    let guard = client.acquire("t1").await.unwrap();
    let renewed = eventually(TTL, async || {
        heard.lock().unwrap().iter().any(|e| matches!(e, redis_lease::LeaseEvent::Renewed { .. }))
    })
    .await;
    assert!(renewed, "no renewal heard within a ttl");
    put(&mut admin, "t1", "intruder", 10_000).await;
    assert!(guard.ensure_owned("after-prepare").await.is_err());
    assert!(guard.ensure_owned("between-batches").await.is_err());
    // A release is the holder's choice, not a loss: observers hear nothing of it.
    let other = client.acquire("t2").await.unwrap();
    other.release().await.unwrap();
    let losses: Vec<_> =
        heard.lock().unwrap().iter().filter(|e| matches!(e, redis_lease::LeaseEvent::Lost { .. })).cloned().collect();
    assert_eq!(losses.len(), 1, "{losses:?}");
    let redis_lease::LeaseEvent::Lost { loss, token } = &losses[0] else { unreachable!() };
    assert_eq!(token, guard.token());
    assert_eq!(loss.reason, LossReason::HeldByOther);
}
