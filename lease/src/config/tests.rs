use std::time::Duration;

use super::*;

#[track_caller]
fn check(config: LeaseConfig, expect_field: Option<&str>) {
    match (config.validate(), expect_field) {
        (Ok(()), None) => {}
        (Err(LeaseError::InvalidConfig { field, reason }), Some(want)) => {
            assert_eq!(field, want, "reason: {reason}");
        }
        (got, want) => panic!("validate() = {got:?}, expected field {want:?}"),
    }
}

#[test]
fn production_defaults_are_valid_and_as_documented() {
    let c = LeaseConfig::default();
    assert_eq!(c.ttl(), Duration::from_millis(120_000));
    assert_eq!(c.renew_interval(), Duration::from_millis(40_000));
    assert_eq!(c.acquire_wait(), Duration::from_millis(30_000));
    check(c, None);
}

#[test]
fn scaled_keeps_the_ratios() {
    let c = LeaseConfig::scaled(Duration::from_millis(3_000));
    assert_eq!(c.renew_interval(), Duration::from_millis(1_000));
    assert_eq!(c.acquire_wait(), Duration::from_millis(750));
    check(c, None);
}

#[test]
fn invalid_combinations_name_the_field() {
    let base = || LeaseConfig::scaled(Duration::from_secs(3));
    check(base().with_ttl(Duration::ZERO), Some("ttl"));
    check(base().with_renew_interval(Duration::ZERO), Some("renew_interval"));
    check(base().with_renew_interval(Duration::from_secs(3)), Some("renew_interval"));
    check(base().with_acquire_wait(Duration::ZERO), Some("acquire_wait"));
    check(base().with_command_timeout(Duration::ZERO), Some("command_timeout"));
    check(base().with_command_timeout(Duration::from_secs(3)), Some("command_timeout"));
    check(base().with_retry(Duration::from_millis(10), Duration::from_millis(5)), Some("retry_max"));
    check(base().with_ttl(Duration::from_micros(3_000_500)), Some("ttl"));
    check(base().with_drift_margin(Duration::from_secs(2)), Some("drift_margin"));
    check(base().with_key_prefix("a{b}"), Some("key_prefix"));
    check(
        base().with_replication_guard(ReplicationGuard { replicas: 0, timeout: Duration::from_millis(10) }),
        Some("replication.replicas"),
    );
    check(
        base().with_replication_guard(ReplicationGuard { replicas: 1, timeout: Duration::from_millis(50) }),
        Some("replication.timeout"),
    );
}
