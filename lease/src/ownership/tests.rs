use std::time::Duration;

use tokio::time::Instant;

use super::*;

const MS: Duration = Duration::from_millis(1);

fn timing() -> Timing {
    Timing { ttl: 3000 * MS, renew_interval: 1000 * MS, drift: 32 * MS, no_deadline: false }
}

#[test]
fn validity_counts_from_when_the_write_was_sent() {
    let t0 = Instant::now();
    let mut o = Ownership::acquired(timing(), t0);
    assert_eq!(o.deadline(), t0 + 2968 * MS);
    assert_eq!(o.renewal_due(), t0 + 1000 * MS);
    // A renewal sent at 1 s that answered at 1.9 s extends from 1 s, not from 1.9 s.
    assert_eq!(o.on_renewal(t0 + 1000 * MS, RenewOutcome::Extended, t0 + 1900 * MS, false), None);
    assert_eq!(o.deadline(), t0 + 3968 * MS);
    assert_eq!(o.renewal_due(), t0 + 2000 * MS);
}

#[test]
fn renewal_answered_after_the_deadline_is_a_loss() {
    let t0 = Instant::now();
    let mut o = Ownership::acquired(timing(), t0);
    let late = o.on_renewal(t0 + 2900 * MS, RenewOutcome::Extended, t0 + 2970 * MS, false);
    assert_eq!(late, Some(LossReason::RenewalLate));
    let sent_late = o.on_renewal(t0 + 2980 * MS, RenewOutcome::Extended, t0 + 2990 * MS, false);
    assert_eq!(sent_late, Some(LossReason::RenewalLate));
}

#[test]
fn renewal_rejection_and_failure_are_losses() {
    let t0 = Instant::now();
    let mut o = Ownership::acquired(timing(), t0);
    assert_eq!(o.on_renewal(t0, RenewOutcome::NotOwner, t0, false), Some(LossReason::RenewalRejected));
    assert_eq!(
        o.on_renewal(t0, RenewOutcome::Failed("io".into()), t0, false),
        Some(LossReason::RenewalFailed("io".into()))
    );
}

#[test]
fn ignored_failures_keep_the_lease_believed_valid() {
    let t0 = Instant::now();
    let mut o = Ownership::acquired(timing(), t0);
    assert_eq!(o.on_renewal(t0 + 1000 * MS, RenewOutcome::NotOwner, t0 + 1000 * MS, true), None);
    assert!(o.deadline() > t0 + 3000 * MS);
}

#[test]
fn first_loss_is_sticky() {
    let t0 = Instant::now();
    let mut o = Ownership::acquired(timing(), t0);
    assert!(o.lose(LossReason::KeyMissing, Some("after-prepare"), t0 + 5 * MS).1);
    assert!(!o.lose(LossReason::Released, None, t0 + 9 * MS).1);
    let loss = o.loss().unwrap();
    assert_eq!(loss.reason, LossReason::KeyMissing);
    assert_eq!(loss.checkpoint.as_deref(), Some("after-prepare"));
    assert_eq!(loss.after, 5 * MS);
}

#[test]
fn a_check_that_reads_our_token_still_fails_past_the_deadline() {
    let t0 = Instant::now();
    let o = Ownership::acquired(timing(), t0);
    assert_eq!(o.on_check(CheckOutcome::Ours, t0 + 100 * MS), None);
    assert_eq!(o.on_check(CheckOutcome::Ours, t0 + 2968 * MS), Some(LossReason::Expired));
    assert_eq!(o.on_check(CheckOutcome::Other, t0), Some(LossReason::HeldByOther));
    assert_eq!(o.on_check(CheckOutcome::Missing, t0), Some(LossReason::KeyMissing));
}
