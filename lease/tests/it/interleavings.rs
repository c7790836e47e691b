//! Random interleavings of checkpoints, renewals (by waiting), outside overwrites, deletions,
//! expiries, restores of our own token and release, against a real Redis. Asserts, after every step:
//! once lost, never writable again (and the first reason is kept); a stale guard never changes a
//! key that holds someone else's token.

use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, TestCaseError, TestRunner};
use redis::AsyncCommands;

use redis_lease::LeaseConfig;

use crate::protocol::{config, holder, keys, put};
use crate::redis_server::RedisServer;

#[derive(Debug, Clone)]
enum Step {
    Check,
    Wait(u64),
    Overwrite,
    Delete,
    Expire,
    RestoreOwnToken,
    Release,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => Just(Step::Check),
        4 => (0u64..450).prop_map(Step::Wait),
        2 => Just(Step::Overwrite),
        1 => Just(Step::Delete),
        1 => Just(Step::Expire),
        2 => Just(Step::RestoreOwnToken),
        1 => Just(Step::Release),
    ]
}

const FOREIGN_TTL_MS: u64 = 50_000;

async fn run(redis: &RedisServer, config: LeaseConfig, case: u32, steps: Vec<Step>) -> Result<(), TestCaseError> {
    let tenant = format!("case{case}");
    let mut admin = redis.conn().await;
    let guard =
        redis.client("a", config).await.acquire(&tenant).await.map_err(|e| TestCaseError::fail(e.to_string()))?;
    let mine = guard.token().as_str().to_owned();
    let mut first_loss: Option<redis_lease::Loss> = None;
    let mut foreign: Option<String> = None;
    for (i, step) in steps.into_iter().enumerate() {
        match step {
            Step::Check => {
                let ok = guard.ensure_owned("check").await.is_ok();
                if first_loss.is_some() {
                    prop_assert!(!ok, "step {i}: a lost guard passed a checkpoint");
                }
            }
            Step::Wait(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
            Step::Overwrite => {
                let other = format!("other-{i}");
                put(&mut admin, &tenant, &other, FOREIGN_TTL_MS).await;
                foreign = Some(other);
            }
            Step::Delete => {
                let _: () = admin.del(keys(&tenant).lease).await.unwrap();
                foreign = None;
            }
            Step::Expire => {
                let _: () = admin.pexpire(keys(&tenant).lease, 1).await.unwrap();
                tokio::time::sleep(Duration::from_millis(3)).await;
                foreign = None;
            }
            Step::RestoreOwnToken => {
                put(&mut admin, &tenant, &mine, 600).await;
                foreign = None;
            }
            Step::Release => {
                let _ = guard.release().await;
            }
        }
        // Sticky: the first loss, once seen, never changes and never goes away.
        match (&first_loss, guard.loss()) {
            (Some(first), now) => prop_assert_eq!(Some(first.clone()), now, "step {}: loss changed", i),
            (None, now) => first_loss = now,
        }
        if first_loss.is_some() {
            prop_assert!(guard.ensure_owned("after-loss").await.is_err(), "step {i}: writable after loss");
        }
        // A key holding someone else's token keeps its value and its long ttl: we never renewed,
        // deleted or overwrote it.
        if let Some(other) = &foreign {
            let now = holder(&mut admin, &tenant).await;
            prop_assert_eq!(now.as_deref(), Some(other.as_str()), "step {}", i);
            let left: i64 = admin.pttl(keys(&tenant).lease).await.unwrap();
            prop_assert!(left > (FOREIGN_TTL_MS as i64) - 10_000, "step {i}: foreign key's ttl changed to {left} ms");
        }
    }
    Ok(())
}

/// Runs the interleavings with `config`; `Err` carries proptest's minimal failing case.
pub fn explore(config: &LeaseConfig, runner: &mut TestRunner) -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let redis = RedisServer::start().unwrap();
    let case = std::sync::atomic::AtomicU32::new(0);
    let result = runner.run(&proptest::collection::vec(step(), 1..12), |steps| {
        let n = case.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        rt.block_on(run(&redis, config.clone(), n, steps))
    });
    result.map_err(|e| e.to_string())
}

/// `persist`: record failing cases in `proptest-regressions/` (off when a failure is the goal).
pub fn proptest_config(cases: u32, persist: bool) -> Config {
    let persistence = FileFailurePersistence::Direct("proptest-regressions/interleavings.txt");
    Config { cases, failure_persistence: persist.then(|| Box::new(persistence) as Box<_>), ..Config::default() }
}

#[test]
fn random_interleavings_never_make_a_lost_guard_writable() {
    let mut runner = TestRunner::new(proptest_config(32, true));
    if let Err(e) = explore(&config(), &mut runner) {
        panic!("{e}");
    }
}
