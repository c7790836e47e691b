//! The correct build through every flaw scenario: no deviation is ever observed. Each test here
//! has a twin in `flaws` that selects the flaw and observes the deviation.

use crate::flaw_scenarios as s;
use crate::protocol::config;

#[tokio::test]
async fn correct_renewal_never_extends_a_successor() {
    assert!(!s::stale_renewal_extends_successor(config()).await);
}

#[tokio::test]
async fn correct_release_never_deletes_a_successor() {
    assert!(!s::stale_release_deletes_successor(config()).await);
}

#[tokio::test]
async fn correct_loss_stays_lost_when_the_token_returns() {
    assert!(!s::lost_guard_becomes_writable_again(config()).await);
}

#[tokio::test]
async fn correct_acquire_waits_for_the_holder() {
    assert!(!s::second_acquire_overwrites_holder(config()).await);
}

#[tokio::test]
async fn correct_renewal_interval_keeps_the_key() {
    assert!(!s::key_expires_between_renewals(config()).await);
}

#[tokio::test]
async fn correct_rejected_renewal_is_reported_as_loss() {
    assert!(!s::rejected_renewal_goes_unreported(config()).await);
}

#[tokio::test]
async fn correct_renewal_reports_or_survives_a_reconnect() {
    assert!(!s::renewal_dies_silently_after_reconnect(config()).await);
}

#[tokio::test]
async fn correct_validity_counts_from_the_send() {
    assert!(!s::validity_counts_from_the_reply(config()).await);
}

#[tokio::test]
async fn correct_deadline_ends_within_the_ttl() {
    assert!(!s::no_deadline_past_the_ttl(config()).await);
}
