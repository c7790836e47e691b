//! Built only with `--features flaws`: each flaw, selected, shows its deviation. The twin test on
//! the correct build is in `flaw_controls`.

use redis_lease::Flaw;

use crate::flaw_scenarios as s;
use crate::protocol::config;

#[tokio::test]
async fn renew_without_owner_compare_extends_a_successor() {
    assert!(s::stale_renewal_extends_successor(config().with_flaw(Flaw::RenewWithoutOwnerCompare)).await);
}

#[tokio::test]
async fn release_without_owner_compare_deletes_a_successor() {
    assert!(s::stale_release_deletes_successor(config().with_flaw(Flaw::ReleaseWithoutOwnerCompare)).await);
}

#[tokio::test]
async fn non_sticky_loss_becomes_writable_again() {
    assert!(s::lost_guard_becomes_writable_again(config().with_flaw(Flaw::NonStickyLoss)).await);
}

#[tokio::test]
async fn acquire_without_nx_overwrites_the_holder() {
    assert!(s::second_acquire_overwrites_holder(config().with_flaw(Flaw::AcquireWithoutNx)).await);
}

#[tokio::test]
async fn renew_interval_equal_to_ttl_lets_the_key_expire() {
    assert!(s::key_expires_between_renewals(config().with_flaw(Flaw::RenewIntervalEqualsTtl)).await);
}

#[tokio::test]
async fn ignored_renewal_errors_leave_the_loss_unreported() {
    assert!(s::rejected_renewal_goes_unreported(config().with_flaw(Flaw::RenewalErrorsIgnored)).await);
}

#[tokio::test]
async fn renewal_stops_silently_after_a_reconnect() {
    assert!(s::renewal_dies_silently_after_reconnect(config().with_flaw(Flaw::RenewalStopsAfterReconnect)).await);
}

#[test]
fn the_interleaving_properties_catch_non_sticky_loss_and_unchecked_renewal() {
    use proptest::test_runner::{RngAlgorithm, TestRng, TestRunner};
    for flaw in [Flaw::NonStickyLoss, Flaw::RenewWithoutOwnerCompare] {
        // A fixed seed: this test is about the properties failing, not about luck.
        let rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
        let mut runner = TestRunner::new_with_rng(crate::interleavings::proptest_config(64, false), rng);
        let result = crate::interleavings::explore(&config().with_flaw(flaw), &mut runner);
        assert!(result.is_err(), "{flaw:?} went unnoticed by the interleaving properties");
    }
}

#[test]
fn every_flaw_has_a_stable_name() {
    for flaw in Flaw::ALL {
        assert_eq!(Flaw::from_name(flaw.name()), Some(flaw));
    }
    assert_eq!(Flaw::from_name("no-such-flaw"), None);
}

#[tokio::test]
async fn validity_from_reply_counts_past_the_send() {
    assert!(s::validity_counts_from_the_reply(config().with_flaw(Flaw::ValidityFromReply)).await);
}

#[tokio::test]
async fn no_local_deadline_lets_the_validity_outlive_the_ttl() {
    assert!(s::no_deadline_past_the_ttl(config().with_flaw(Flaw::NoLocalDeadline)).await);
}
