use leasequake_reports::history::ObserverSample;

use super::run_end;
use crate::fault::follow_delays;
use crate::holders::Holders;
use crate::observer::observed;
use crate::scenario::Observed;
use std::time::Duration;
use std::time::Instant;

const MS: u64 = 1_000_000;

fn lease() -> Holders {
    Holders::new("t1", 3)
}

fn sample(instance: &str, at_ms: u64, holder: Option<&str>, ttl_ms: Option<i64>, role: &str) -> ObserverSample {
    ObserverSample {
        instance: instance.into(),
        at_ns: at_ms * MS,
        holder: holder.map(str::to_owned),
        ttl_ms,
        role: Some(role.into()),
        error: None,
        asked_ns: None,
    }
}

#[test]
fn a_key_that_ran_out_under_its_holder_expired_one_released_early_did_not() {
    // The previous sample's exec began at 900 ms and answered at 1000 ms: PTTL 593 ms, so the key
    // runs out at 1493 ms at the earliest.
    let held = sample("redis-primary", 1000, Some("n2/1/7/ab"), Some(593), "master");
    let prev = Some((&held, 900 * MS));
    // Samples 600 ms apart (a loaded machine): gone by an answer after the earliest run-out.
    let gone = sample("redis-primary", 1600, None, None, "master");
    assert_eq!(observed(prev, &gone, &lease()), vec![Observed::KeyExpired { node: "n2".into() }]);
    let taken = sample("redis-primary", 1600, Some("n3/1/9/cd"), Some(1490), "master");
    assert_eq!(observed(prev, &taken, &lease()), vec![Observed::KeyExpired { node: "n2".into() }]);
    // Released at its deadline, 17 ms before its key would run out, and seen gone by a sample
    // answered at 1550 ms (before exec start + PTTL from the answer's stamp, 1593 ms): expired.
    let at_deadline = sample("redis-primary", 1550, None, None, "master");
    assert_eq!(observed(prev, &at_deadline, &lease()), vec![Observed::KeyExpired { node: "n2".into() }]);
    // Gone long before it could have run out: released (or deleted), not expired.
    let released = sample("redis-primary", 1300, None, None, "master");
    assert_eq!(observed(prev, &released, &lease()), vec![]);
    // Still held (renewed): nothing.
    let renewed = sample("redis-primary", 1600, Some("n2/1/7/ab"), Some(1400), "master");
    assert_eq!(observed(prev, &renewed, &lease()), vec![]);
    // The replica's copy does not expire on its own clock: only the primary's key counts.
    let on_replica = sample("redis-replica", 1000, Some("n2/1/7/ab"), Some(593), "slave");
    let after = sample("redis-replica", 1600, None, None, "slave");
    assert_eq!(observed(Some((&on_replica, 900 * MS)), &after, &lease()), vec![]);
}

#[test]
fn a_library_token_expires_under_the_node_that_reported_it_and_an_unknown_one_is_no_sighting() {
    let held = sample("redis-primary", 1000, Some("x9Qz+a=="), Some(593), "master");
    let prev = Some((&held, 900 * MS));
    let gone = sample("redis-primary", 1600, None, None, "master");
    let lease = lease();
    assert_eq!(observed(prev, &gone, &lease), vec![], "nobody reported that token: whose ran out is unknown");
    let acquired =
        leasequake_reports::history::EventKind::Acquired { token: "x9Qz+a==".into(), fence: 3, sent_ns: None };
    lease.saw("n3", &acquired);
    assert_eq!(observed(prev, &gone, &lease), vec![Observed::KeyExpired { node: "n3".into() }]);
}

#[test]
fn a_role_that_differs_from_the_previous_sample_changed() {
    let before = sample("redis-replica", 1000, None, None, "slave");
    let after = sample("redis-replica", 1250, None, None, "master");
    let prev = Some((&before, 900 * MS));
    assert_eq!(
        observed(prev, &after, &lease()),
        vec![Observed::RoleChanged { instance: "redis-replica".into(), role: "master".into() }]
    );
    assert_eq!(observed(prev, &before.clone(), &lease()), vec![]);
    assert_eq!(observed(None, &after, &lease()), vec![], "a first sample has nothing to differ from");
}

#[test]
fn a_late_heal_extends_the_run_to_the_liveness_bound_and_no_further_than_a_minute() {
    let t0 = Instant::now();
    let planned = t0 + Duration::from_secs(9);
    assert_eq!(run_end(planned, None, 2850), planned, "no fault: the planned end");
    assert_eq!(run_end(planned, Some(t0 + Duration::from_secs(4)), 2850), planned, "healed in time");
    let late = t0 + Duration::from_millis(6637);
    assert_eq!(run_end(planned, Some(late), 2850), late + Duration::from_millis(2850 + 500));
    let stuck = t0 + Duration::from_secs(300);
    assert_eq!(run_end(planned, Some(stuck), 2850), planned + Duration::from_secs(60));
}

#[test]
fn each_node_follows_a_failover_at_its_own_delay_or_never() {
    let text = "name = \"f\"\ndescription = \"d\"\nincident = \"i\"\nduration_s = 30\n[nodes]\ncount = 4\n\
                [lease]\nttl_ms = 1500\n[store]\npolicy = \"enforce\"\nfence_source = \"store\"\n[[faults]]\n\
                kind = \"failover\"\nmode = \"pause\"\nat_s = 5\nduration_s = 10\nfollow_ms = 300\n\
                never_follow = [\"n1\"]\nfollow_ms_by_node = { n3 = 2500, n4 = 0 }\n";
    let s = crate::scenario::parse(std::path::Path::new("f.toml"), text).unwrap();
    let delays = follow_delays(&s.faults[0], 4);
    let expected = [("n4", 0), ("n2", 300), ("n3", 2500)].map(|(n, d)| (n.to_owned(), d));
    assert_eq!(delays, expected, "own delays first, follow_ms for the rest, never n1");
}
