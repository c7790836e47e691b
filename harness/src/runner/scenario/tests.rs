use std::path::{Path, PathBuf};

use super::{parse, shard};

const OK: &str = r#"name = "owner-paused"
description = "the owner is paused longer than the ttl"
incident = "A GC pause."
duration_s = 30

[nodes]
count = 3

[lease]
ttl_ms = 1500

[store]
policy = "enforce"
fence_source = "store"

[[faults]]
kind = "pause"
target = "owner"
at_s = 5
duration_s = 3
"#;

#[track_caller]
fn check(text: &str, expect: Result<(), (&str, Option<usize>)>) {
    match (parse(Path::new("s.toml"), text), expect) {
        (Ok(_), Ok(())) => {}
        (Err(e), Err((field, line))) => {
            assert_eq!((e.field.as_str(), e.line), (field, line), "{e}");
            assert!(e.to_string().starts_with("s.toml:"), "{e}");
        }
        (got, want) => panic!("got {got:?}, wanted {want:?}"),
    }
}

#[test]
fn a_valid_scenario_parses() {
    check(OK, Ok(()));
}

#[test]
fn a_typo_names_the_unknown_field_and_its_line() {
    check(&OK.replace("duration_s = 30", "duraton_s = 30"), Err(("duraton_s", Some(4))));
}

#[test]
fn a_missing_field_is_named() {
    check(&OK.replace("ttl_ms = 1500", ""), Err(("ttl_ms", Some(9))));
}

#[test]
fn an_unknown_target_names_the_fault_and_the_line() {
    check(&OK.replace("target = \"owner\"", "target = \"n9\""), Err(("faults[0].target", Some(18))));
}

#[test]
fn an_unknown_fault_kind_is_refused() {
    let e = parse(Path::new("s.toml"), &OK.replace("kind = \"pause\"", "kind = \"teleport\"")).unwrap_err();
    assert!(e.message.contains("teleport"), "{e}");
    assert_eq!(e.line, Some(17));
}

#[test]
fn a_schedule_that_cannot_fit_its_liveness_bound_is_refused_with_the_fix() {
    let e = parse(Path::new("s.toml"), &OK.replace("duration_s = 30", "duration_s = 9")).unwrap_err();
    assert_eq!(e.field, "faults[0].at_s");
    assert!(e.message.contains("lengthen duration_s"), "{e}");
}

#[test]
fn a_value_of_the_wrong_type_names_its_field_never_a_placeholder() {
    check(&OK.replace("duration_s = 30", "duration_s = \"abc\""), Err(("duration_s", Some(4))));
    check(&OK.replace("ttl_ms = 1500", "ttl_ms = \"a\""), Err(("lease.ttl_ms", Some(10))));
    check(&OK.replace("at_s = 5", "at_s = \"abc\""), Err(("faults[0].at_s", Some(19))));
    let e = parse(Path::new("s.toml"), &OK.replace("at_s = 5", "at_s = \"abc\"")).unwrap_err();
    assert_eq!(e.to_string(), "s.toml:19: `faults[0].at_s`: invalid type: string \"abc\", expected u64");
}

#[test]
fn bad_values_name_their_field() {
    check(&OK.replace("count = 3", "count = 0"), Err(("nodes.count", Some(7))));
    check(&OK.replace("ttl_ms = 1500", "ttl_ms = 1500\nrenew_ms = 1500"), Err(("lease.renew_ms", Some(11))));
    let expected = OK.replace("[nodes]", "expected = { property = \"no_stale_writes\", why = \"x\" }\n\n[nodes]");
    check(&expected, Err(("expected.property", Some(6))));
    check(&OK.replace("policy = \"enforce\"", "policy = \"strict\""), Err(("store.policy", Some(13))));
}

#[test]
fn a_trigger_is_checked_by_name_and_target() {
    check(&OK.replace("at_s = 5", "on = \"checkpoint-7\"\nat_s = 5"), Ok(()));
    check(&OK.replace("at_s = 5", "on = \"acquired\"\nat_s = 5"), Ok(()));
    check(&OK.replace("at_s = 5", "on = \"checkpoint-8\"\nat_s = 5"), Err(("faults[0].on", Some(19))));
    check(&OK.replace("at_s = 5", "on = \"after-acquire\"\nat_s = 5"), Err(("faults[0].on", Some(19))));
    let non_owner = OK.replace("target = \"owner\"", "target = \"non-owner\"\non = \"acquired\"");
    check(&non_owner, Err(("faults[0].target", Some(18))));
}

#[test]
fn a_failover_needs_its_mode_and_takes_no_node_target() {
    let failover = OK.replace("kind = \"pause\"\ntarget = \"owner\"", "kind = \"failover\"\nmode = \"isolate\"");
    check(&failover, Ok(()));
    check(&failover.replace("mode = \"isolate\"", "mode = \"blackhole\""), Err(("faults[0].mode", Some(18))));
    check(
        &failover.replace("mode = \"isolate\"", "mode = \"isolate\"\nnever_follow = [\"n7\"]"),
        Err(("faults[0].never_follow", Some(19))),
    );
    check(&OK.replace("at_s = 5", "follow_ms = 10\nat_s = 5"), Err(("faults[0].follow_ms", Some(19))));
    // Each node at its own delay: named nodes only, not also never following, failovers only.
    let own = |delays: &str| failover.replace("mode = \"isolate\"", &format!("mode = \"isolate\"\n{delays}"));
    check(&own("follow_ms_by_node = { n2 = 2500 }"), Ok(()));
    check(&own("follow_ms_by_node = { n9 = 2500 }"), Err(("faults[0].follow_ms_by_node", Some(19))));
    check(
        &own("never_follow = [\"n2\"]\nfollow_ms_by_node = { n2 = 2500 }"),
        Err(("faults[0].follow_ms_by_node", Some(20))),
    );
    check(
        &OK.replace("at_s = 5", "follow_ms_by_node = { n2 = 1 }\nat_s = 5"),
        Err(("faults[0].follow_ms_by_node", Some(19))),
    );
}

const RANDOM: &str = r#"
[random]
faults = 4
kinds = ["partition", "pause", "slow_store", "stall_renewal"]
from_s = 2
until_s = 12
max_duration_s = 3
"#;

#[test]
fn a_random_schedule_is_drawn_from_the_seed_within_its_bounds() {
    let s = parse(Path::new("s.toml"), &format!("{OK}{RANDOM}")).unwrap();
    let a = s.schedule(42);
    assert_eq!(a.len(), 5, "the file's fault and four drawn");
    assert_eq!(a, s.schedule(42), "the same seed draws the same schedule");
    assert_ne!(a, s.schedule(43));
    for f in &a[1..] {
        let (at, d) = f.exact_ms.unwrap();
        assert!(at >= 2000 && at + d <= 12_000 && (500..=3000).contains(&d), "{f:?}");
        assert_eq!(f.kind == super::FaultKind::SlowStore, f.target.is_none(), "{f:?}");
    }
    // Version-stable: ChaCha8 from seed 42 draws this first fault on every machine. If this line
    // changes, recorded seeds no longer reproduce their schedules: say so in the changelog.
    let first = &a[1];
    assert_eq!((first.kind.name(), first.exact_ms), ("partition", Some((9055, 866))), "{first:?}");
}

#[test]
fn a_random_section_is_checked() {
    let field = |text: String| parse(Path::new("s.toml"), &format!("{OK}{text}")).unwrap_err().field;
    assert_eq!(field(RANDOM.replace("until_s = 12", "until_s = 4")), "random.until_s");
    assert_eq!(field(RANDOM.replace("\"pause\"", "\"failover\"")), "random.kinds");
    assert_eq!(field(RANDOM.replace("until_s = 12", "until_s = 40")), "random.until_s");
}

#[test]
fn drawn_store_wide_faults_never_overlap_so_each_can_be_probed() {
    let many = RANDOM
        .replace("faults = 4", "faults = 8")
        .replace("\"pause\", \"slow_store\"", "\"failing_store\", \"slow_store\"");
    let s = parse(Path::new("s.toml"), &format!("{OK}{many}")).unwrap();
    for seed in 0..300 {
        let store: Vec<(u64, u64)> = s
            .schedule(seed)
            .iter()
            .filter(|f| f.target.is_none())
            .map(|f| f.exact_ms.map(|(a, d)| (a, a + d)).unwrap())
            .collect();
        for (i, a) in store.iter().enumerate() {
            for b in &store[i + 1..] {
                assert!(a.1 <= b.0 || b.1 <= a.0, "seed {seed}: {a:?} overlaps {b:?}");
            }
        }
    }
}

#[test]
fn drawn_process_faults_never_overlap_so_none_lands_on_a_node_another_has_stopped() {
    // A pause drawn while a crash has its node dead cannot take effect ("SIGSTOP sent, but the
    // process state is Z"), and "owner" is resolved only when a fault applies: so no crash,
    // pause or stall overlaps another, on any node. Other kinds still overlap them.
    let many = RANDOM
        .replace("faults = 4", "faults = 8")
        .replace("\"pause\", \"slow_store\"", "\"pause\", \"crash\", \"stall_renewal\", \"partition\"");
    let s = parse(Path::new("s.toml"), &format!("{OK}{many}")).unwrap();
    let process = |f: &super::Fault| matches!(f.kind.name(), "crash" | "pause" | "stall_renewal");
    let (mut drawn, mut overlapping_others) = (0, 0);
    for seed in 0..300 {
        let faults = s.schedule(seed);
        let window = |f: &super::Fault| f.exact_ms.map(|(a, d)| (a, a + d)).unwrap();
        let p: Vec<(u64, u64)> = faults[1..].iter().filter(|f| process(f)).map(window).collect();
        drawn += p.len();
        for (i, a) in p.iter().enumerate() {
            for b in &p[i + 1..] {
                assert!(a.1 <= b.0 || b.1 <= a.0, "seed {seed}: {a:?} overlaps {b:?}");
            }
        }
        for o in faults[1..].iter().filter(|f| !process(f)).map(window) {
            overlapping_others += p.iter().filter(|a| a.0 < o.1 && o.0 < a.1).count();
        }
    }
    assert!(drawn > 600 && overlapping_others > 100, "{drawn} process faults, {overlapping_others} overlaps");
}

#[test]
fn a_drawn_slow_model_goes_to_the_owner_the_only_node_that_calls_the_model() {
    let slow = RANDOM.replace("faults = 4", "faults = 8").replace("\"pause\"", "\"slow_model\"");
    let s = parse(Path::new("s.toml"), &format!("{OK}{slow}")).unwrap();
    let drawn: Vec<_> = (0..50).flat_map(|seed| s.schedule(seed)).filter(|f| f.kind.name() == "slow_model").collect();
    assert!(drawn.len() > 20, "{}", drawn.len());
    assert!(drawn.iter().all(|f| f.target.as_deref() == Some("owner")), "{drawn:?}");
    // Other kinds still reach every node.
    let others: std::collections::BTreeSet<_> =
        (0..50).flat_map(|seed| s.schedule(seed)).filter_map(|f| f.target).collect();
    assert!(others.len() > 2, "{others:?}");
}

#[test]
fn shards_split_the_sorted_files_without_overlap_or_loss() {
    let files: Vec<PathBuf> = (0..7).map(|i| PathBuf::from(format!("s{i}.toml"))).collect();
    let shards: Vec<Vec<PathBuf>> = (1..=3).map(|k| shard(files.clone(), k, 3)).collect();
    assert_eq!(shards[0], [PathBuf::from("s0.toml"), "s3.toml".into(), "s6.toml".into()]);
    let mut all: Vec<PathBuf> = shards.concat();
    all.sort();
    assert_eq!(all, files);
    assert_eq!(shard(files.clone(), 1, 1), files);
}

#[test]
fn the_command_timeout_leaves_room_for_a_loaded_machine_and_stays_below_the_ttl() {
    let with_ttl = |ttl: u64| {
        let mut s = parse(Path::new("s.toml"), OK).unwrap();
        s.lease.ttl_ms = ttl;
        s.command_timeout_ms()
    };
    assert_eq!(with_ttl(1000), 150, "not 66 ms");
    assert_eq!(with_ttl(6000), 400);
    assert_eq!(with_ttl(120_000), 2000);
    assert_eq!(with_ttl(100), 50, "below the ttl");
    assert_eq!(with_ttl(400), 100);
}

#[test]
fn triggers_name_any_node_event_and_refuse_near_misses() {
    use leasequake_reports::history::{EventKind, StoreOp};

    use super::{EventTrigger, Trigger};
    let persist =
        EventKind::StoreCallSent { token: "t".into(), fence: 1, op: StoreOp::PersistRecord, call: 1, decided_ns: None };
    let upsert =
        EventKind::StoreCallSent { token: "t".into(), fence: 1, op: StoreOp::Upsert, call: 2, decided_ns: None };
    let released = EventKind::Released { token: "t".into(), outcome: "deleted".into() };
    let renewed = EventKind::Renewed { token: "t".into(), sent_ns: None };
    let model1 = EventKind::ModelCall { token: "t".into(), batch: 1, ms: 20, decided_ns: None };
    let sync7 = EventKind::SyncPoint { token: "t".into(), number: 7 };

    let t = |on: &str| Trigger::parse(on).unwrap_or_else(|| panic!("`{on}` should parse"));
    assert_eq!(t("checkpoint-7"), Trigger::Checkpoint(7));
    assert!(t("checkpoint-7").fired_by(&sync7) && !t("checkpoint-6").fired_by(&sync7));
    assert_eq!(t("released"), Trigger::Event(EventTrigger::Released));
    assert!(t("released").fired_by(&released) && !t("released").fired_by(&renewed));
    assert!(t("renewed").fired_by(&renewed));
    assert!(t("store_call_sent").fired_by(&persist) && t("store_call_sent").fired_by(&upsert));
    assert!(t("store_call_sent:persist_record").fired_by(&persist));
    assert!(!t("store_call_sent:persist_record").fired_by(&upsert));
    assert!(t("model_call:1").fired_by(&model1) && !t("model_call:0").fired_by(&model1));
    use super::{Observed, ObservedTrigger};
    let expired = Observed::KeyExpired { node: "n1".into() };
    let role = Observed::RoleChanged { instance: "redis-replica".into(), role: "master".into() };
    assert_eq!(t("key_expired"), Trigger::Observed(ObservedTrigger::KeyExpired));
    assert!(t("key_expired").fired_by_observed(&expired) && !t("key_expired").fired_by_observed(&role));
    assert!(t("role_changed").fired_by_observed(&role) && !t("role_changed").fired_by(&released));
    assert!(!t("released").fired_by_observed(&expired), "a node trigger never fires on what the observer saw");
    for bad in [
        "checkpoint-07",
        "checkpoint-8",
        "checkpoint-",
        "released:1",
        "store_call_sent:persist",
        "store_call_sent:",
        "model_call:x",
        "model_call:",
        "model_call:123456",
        "Released",
        "sync_point",
    ] {
        assert!(Trigger::parse(bad).is_none(), "`{bad}` must be refused");
    }
}

#[test]
fn slow_redis_needs_a_latency_in_range_a_jitter_within_it_and_a_node() {
    let slow = |extra: &str| OK.replace("kind = \"pause\"", &format!("kind = \"slow_redis\"\n{extra}"));
    check(&slow("latency_ms = 100\njitter_ms = 20\ndirection = \"both\""), Ok(()));
    // An error names the field's own line, or the fault's `[[faults]]` line when it is missing.
    check(&slow(""), Err(("faults[0].latency_ms", Some(16))));
    check(&slow("latency_ms = 0"), Err(("faults[0].latency_ms", Some(18))));
    check(&slow("latency_ms = 60001"), Err(("faults[0].latency_ms", Some(18))));
    check(&slow("latency_ms = 100\njitter_ms = 101"), Err(("faults[0].jitter_ms", Some(19))));
    let e = parse(Path::new("s.toml"), &slow("latency_ms = 100\ndirection = \"sideways\"")).unwrap_err();
    assert!(e.message.contains("sideways"), "{e}");
    // jitter_ms and direction belong to slow_redis alone.
    check(&OK.replace("kind = \"pause\"", "kind = \"pause\"\njitter_ms = 5"), Err(("faults[0].jitter_ms", Some(18))));
    check(
        &OK.replace("kind = \"pause\"", "kind = \"pause\"\ndirection = \"replies\""),
        Err(("faults[0].direction", Some(18))),
    );
}

#[test]
fn an_aimed_fault_names_its_lease_command_and_command_belongs_to_lose_replies_and_slow_redis() {
    let lose = |extra: &str| OK.replace("kind = \"pause\"", &format!("kind = \"lose_replies\"\n{extra}"));
    for aimed in ["acquire", "renewal", "release"] {
        check(&lose(&format!("command = \"{aimed}\"")), Ok(()));
    }
    let e = parse(Path::new("s.toml"), &lose("command = \"check\"")).unwrap_err();
    assert!(e.message.contains("check") && e.message.contains("renewal"), "{e}");
    check(
        &OK.replace("kind = \"pause\"", "kind = \"pause\"\ncommand = \"renewal\""),
        Err(("faults[0].command", Some(18))),
    );
}

#[test]
fn a_clock_jump_moves_the_primary_or_a_named_node_by_a_bounded_nonzero_jump() {
    let jump = |target: &str, ms: &str| {
        OK.replace("kind = \"pause\"", &format!("kind = \"clock_jump\"\njump_ms = {ms}"))
            .replace("target = \"owner\"", target)
    };
    check(&jump("", "-10000"), Ok(()));
    check(&jump("target = \"owner\"", "-10000"), Ok(()));
    check(&jump("target = \"n2\"", "30000"), Ok(()));
    check(&jump("target = \"n9\"", "30000"), Err(("faults[0].target", Some(19))));
    check(&jump("target = \"n01\"", "30000"), Err(("faults[0].target", Some(19))));
    check(&jump("", "0"), Err(("faults[0].jump_ms", Some(18))));
    check(&jump("", "86400001"), Err(("faults[0].jump_ms", Some(18))));
    check(&jump("", "-9223372036854775808"), Err(("faults[0].jump_ms", Some(18))));
}

#[test]
fn numbers_out_of_range_are_refused_before_any_arithmetic_names_them() {
    let with = |from: &str, to: &str| OK.replace(from, to);
    let fault = |extra: &str| format!("{OK}{extra}\n");
    let huge = i64::MAX.to_string();
    let cases: Vec<(String, &str)> = vec![
        (with("duration_s = 30", &format!("duration_s = {huge}")), "duration_s"),
        (with("duration_s = 30", "duration_s = 86401"), "duration_s"),
        (with("ttl_ms = 1500", &format!("ttl_ms = {huge}")), "lease.ttl_ms"),
        (with("ttl_ms = 1500", &format!("ttl_ms = 1500\nacquire_wait_ms = {huge}")), "lease.acquire_wait_ms"),
        (with("at_s = 5", &format!("at_s = {huge}")), "faults[0].at_s"),
        (with("at_s = 5\nduration_s = 3", &format!("at_s = 5\nduration_s = {huge}")), "faults[0].duration_s"),
        (
            with("fence_source = \"store\"", &format!("fence_source = \"store\"\nlatency_ms = {}", i64::MAX)),
            "store.latency_ms",
        ),
        (
            fault(&format!("[[faults]]\nkind = \"clock_jump\"\nat_s = 5\nduration_s = 3\njump_ms = {}", i64::MIN)),
            "faults[1].jump_ms",
        ),
        (
            fault(&format!(
                "[random]\nfaults = 2\nkinds = [\"pause\"]\nfrom_s = 1\nuntil_s = 10\nmax_duration_s = {}",
                u64::MAX / 1000 + 1
            )),
            "random.max_duration_s",
        ),
        (with("target = \"owner\"", "target = \"n01\""), "faults[0].target"),
        (with("name = \"owner-paused\"", &format!("name = \"{}\"", "a".repeat(65))), "name"),
        (with("name = \"owner-paused\"", "name = \"Owner-Paused\""), "name"),
    ];
    for (text, field) in cases {
        let e = parse(Path::new("s.toml"), &text).expect_err(field);
        assert_eq!(e.field, field, "{e}");
        assert!(e.line.is_some(), "{e}: names its line");
    }
    // The edges of the ranges are taken.
    parse(Path::new("s.toml"), &with("name = \"owner-paused\"", &format!("name = \"{}\"", "a".repeat(64)))).unwrap();
}

#[test]
fn control_characters_from_a_file_never_reach_the_terminal_raw() {
    let text = OK.replace("target = \"owner\"", "target = \"n9\\u001b[2J\"");
    let e = parse(Path::new("s.toml"), &text).unwrap_err();
    let shown = e.to_string();
    assert!(!shown.contains('\u{1b}'), "{shown:?}");
    assert!(shown.contains("\\u{1b}"), "{shown:?}");
}

#[test]
fn faults_sentinel_could_mistake_for_a_dead_primary_need_a_longer_down_after() {
    let pause = |down_after: u64| {
        format!("{OK}\n[[faults]]\nkind = \"pause_writes\"\nat_s = 10\nduration_s = 2\n")
            .replace("[store]", &format!("[sentinel]\ndown_after_ms = {down_after}\n\n[store]"))
    };
    let e = parse(Path::new("s.toml"), &pause(1000)).unwrap_err();
    assert_eq!(e.field, "faults[1].duration_s", "{e}");
    assert!(e.message.contains("down_after_ms to at least 5000"), "{e}");
    parse(Path::new("s.toml"), &pause(5000)).unwrap();
    let restart = format!("{OK}\n[[faults]]\nkind = \"redis_restart\"\nat_s = 10\nduration_s = 1\n");
    assert_eq!(parse(Path::new("s.toml"), &restart).unwrap_err().field, "faults[1].kind");
    parse(Path::new("s.toml"), &restart.replace("[store]", "[sentinel]\ndown_after_ms = 3000\n\n[store]")).unwrap();
}

/// A run directory holding `scenario` and `schedule`, for `replay`.
fn run_dir(name: &str, scenario: &str, schedule: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("leasequake-replay-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("scenario.toml"), scenario).unwrap();
    std::fs::write(dir.join("schedule.json"), schedule).unwrap();
    dir
}

#[test]
fn a_schedule_the_runner_writes_replays_as_the_same_faults_and_an_older_one_still_replays() {
    let s = parse(Path::new("s.toml"), OK).unwrap();
    let f = &s.faults[0];
    let steps = vec![super::ScheduleStep::executed(1, f, "n2", 5012)];
    let dir = run_dir("typed", OK, &serde_json::to_string_pretty(&steps).unwrap());
    let replayed = super::replay(&dir).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let g = &replayed.faults[0];
    assert_eq!((g.kind, g.target.as_deref(), g.exact_ms, g.number), (f.kind, Some("n2"), Some((5012, 3000)), Some(1)));
    // A schedule.json as recorded before fault numbers, triggers and the later fields existed.
    let older = r#"[{"kind":"partition","target":"n1","at_ms":4000,"duration_ms":2000,"link":"redis","mode":"blackhole","latency_ms":null,"follow_ms":null,"never_follow":null}]"#;
    let dir = run_dir("older", OK, older);
    let replayed = super::replay(&dir).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let g = &replayed.faults[0];
    assert_eq!((g.kind.name(), g.target.as_deref(), g.exact_ms), ("partition", Some("n1"), Some((4000, 2000))));
    assert_eq!((g.link, g.mode), (Some(super::Link::Redis), Some(super::Mode::Blackhole)));
}

#[test]
fn at_ms_and_duration_ms_refine_a_faults_seconds_and_must_agree_with_them() {
    let exact = |extra: &str| OK.replace("duration_s = 3\n", &format!("duration_s = 3\n{extra}\n"));
    let parsed = parse(Path::new("s.toml"), &exact("at_ms = 5250\nduration_ms = 2100")).unwrap();
    let f = &parsed.faults[0];
    assert_eq!((f.at_ms(), f.duration_ms()), (5250, 2100));
    let seconds = parse(Path::new("s.toml"), OK).unwrap();
    assert_eq!((seconds.faults[0].at_ms(), seconds.faults[0].duration_ms()), (5000, 3000));
    check(&exact("at_ms = 6000"), Err(("faults[0].at_ms", Some(21))));
    check(&exact("at_ms = 4999"), Err(("faults[0].at_ms", Some(21))));
    check(&exact("duration_ms = 2000"), Err(("faults[0].duration_ms", Some(21))));
    check(&exact("duration_ms = 3001"), Err(("faults[0].duration_ms", Some(21))));
    check(&exact("at_ms = 5000\non = \"acquired\""), Err(("faults[0].at_ms", Some(21))));
}

mod smaller {
    use crate::scenario::smaller::{candidate, count, Step, CONTAINER_STEPS};
    use crate::scenario::{parse, Fault};

    /// `OK` (a pause of the owner at 5 s for 3 s, 30 s), its fault aimed at n2 at 8 s for 4 s.
    fn file() -> crate::scenario::Scenario {
        let text = super::OK.replace("target = \"owner\"", "target = \"n2\"");
        parse(std::path::Path::new("s.toml"), &text).unwrap()
    }

    fn faults(n: u64) -> Vec<Fault> {
        let f = file().faults[0].clone();
        (0..n)
            .map(|k| {
                let mut g = f.clone();
                g.exact_ms = Some((8_000 + k * 1_000, 4_000));
                g
            })
            .collect()
    }

    fn all(steps: &[Step], fs: &[Fault]) -> Vec<(Vec<Fault>, String)> {
        (0..count(steps, fs.len())).filter_map(|i| candidate(&file(), steps, fs, i)).collect()
    }

    #[test]
    fn chunks_come_first_halving_down_to_pairs_and_every_fault_is_removed_once() {
        let fs = faults(8);
        let c = all(&[Step::RemoveChunk], &fs);
        let sizes: Vec<usize> = c.iter().map(|(f, _)| 8 - f.len()).collect();
        assert_eq!(sizes, vec![4, 4, 2, 2, 2, 2], "{:?}", c.iter().map(|x| &x.1).collect::<Vec<_>>());
        assert!(all(&[Step::RemoveChunk], &faults(3)).is_empty(), "no chunk of one: that is Remove's");
        let singles = all(&[Step::Remove], &fs);
        assert_eq!(singles.len(), 8);
        assert!(singles.iter().all(|(f, _)| f.len() == 7));
    }

    #[test]
    fn a_fault_is_halved_aimed_at_the_owner_and_begun_earlier_until_it_cannot_be() {
        let fs = faults(1);
        let c = all(CONTAINER_STEPS, &fs);
        let tried: Vec<&str> = c.iter().map(|(_, t)| t.as_str()).collect();
        assert_eq!(c.len(), 4, "remove, halve, owner, earlier: {tried:?}");
        assert_eq!(c[1].0[0].duration_ms(), 2_000, "{tried:?}");
        assert_eq!(c[2].0[0].target.as_deref(), Some("owner"), "{tried:?}");
        assert_eq!((c[3].0[0].at_ms(), c[3].0[0].duration_ms()), (4_000, 4_000), "{tried:?}");
        // At the shortest a probe verifies, on the owner, in the first seconds: only removal is left.
        let mut f = fs[0].clone();
        f.exact_ms = Some((1_500, 500));
        f.target = Some("owner".into());
        let c = all(CONTAINER_STEPS, &[f]);
        assert_eq!(c.len(), 1, "{:?}", c.iter().map(|x| &x.1).collect::<Vec<_>>());
        assert!(c[0].0.is_empty());
    }
}

#[test]
fn a_sim_table_is_refused_beside_faults_which_the_draw_would_never_use() {
    let text = format!("{OK}\n[sim]\nswarm = true\n");
    let line = text.lines().position(|l| l == "swarm = true").map(|i| i + 1);
    check(&text, Err(("sim.swarm", line)));
    let no_faults = OK.split("[[faults]]").next().unwrap().to_owned();
    check(&format!("{no_faults}\n[sim]\nswarm = true\ntriggers = true\n"), Ok(()));
    let typo = format!("{no_faults}\n[sim]\nswarn = true\n");
    let line = typo.lines().position(|l| l == "swarn = true").map(|i| i + 1);
    check(&typo, Err(("swarn", line)));
}

mod any_file {
    //! Any scenario file, however wrong, parses or is refused naming the file and the field:
    //! never a panic, never a number that wraps (proptest).
    use super::{parse, OK};
    use proptest::prelude::*;
    use std::path::Path;

    /// A value as a file might hold it: numbers at and past every width's edge, signs, floats,
    /// strings, arrays, tables.
    fn value() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<i64>().prop_map(|n| n.to_string()),
            any::<u64>().prop_map(|n| n.to_string()),
            Just("18446744073709551616".to_owned()),
            Just("-9223372036854775809".to_owned()),
            Just("1e300".to_owned()),
            Just("nan".to_owned()),
            Just("-0".to_owned()),
            "[a-z_\\-]{0,12}".prop_map(|s| format!("\"{s}\"")),
            Just("[1, 2]".to_owned()),
            Just("{ n2 = 18446744073709551615 }".to_owned()),
            Just("true".to_owned()),
        ]
    }

    /// Every key a scenario file may hold, and some it may not.
    const KEYS: &[&str] = &[
        "duration_s",
        "count",
        "ttl_ms",
        "renew_ms",
        "embed_ms",
        "at_s",
        "duration_s",
        "at_ms",
        "duration_ms",
        "latency_ms",
        "jitter_ms",
        "jump_ms",
        "follow_ms",
        "follow_ms_by_node",
        "waste_budget_ms",
        "on",
        "target",
        "kind",
        "command",
        "direction",
        "mode",
        "link",
        "never_follow",
        "unreplicated_acquire",
        "checkpoints",
        "sync_points",
        "batches",
        "seed",
        "policy",
        "fence_source",
        "typo_field",
    ];

    proptest! {
        #![proptest_config(ProptestConfig { cases: 768, ..ProptestConfig::default() })]
        #[test]
        fn a_key_set_to_any_value_in_any_table_parses_or_is_refused_naming_file_and_field(
            table in prop::sample::select(vec!["", "[nodes]\n", "[lease]\n", "[pipeline]\n", "[store]\n", "[[faults]]\nkind = \"pause\"\ntarget = \"owner\"\nat_s = 5\nduration_s = 3\n", "[random]\n", "[sentinel]\n"]),
            key in prop::sample::select(KEYS),
            v in value(),
        ) {
            // The edit goes at the end of the file, in `table` (a new table, or the top level's
            // keys moved to the front).
            let text = if table.is_empty() { format!("{key} = {v}\n{OK}") } else { format!("{OK}{table}{key} = {v}\n") };
            if let Err(e) = parse(Path::new("s.toml"), &text) {
                let shown = e.to_string();
                prop_assert!(shown.starts_with("s.toml"), "{}", shown);
                prop_assert!(!e.field.is_empty() && e.field != "-" && !e.message.is_empty(), "{}", shown);
            }
        }

        #[test]
        fn any_byte_anywhere_parses_or_is_refused_naming_the_file(at in 0usize..OK.len(), byte in any::<u8>(), cut in any::<bool>()) {
            let mut bytes = OK.as_bytes().to_vec();
            if cut { bytes.truncate(at) } else { bytes[at] = byte }
            let text = String::from_utf8_lossy(&bytes);
            if let Err(e) = parse(Path::new("s.toml"), &text) {
                prop_assert!(e.to_string().starts_with("s.toml"), "{}", e);
            }
        }
    }
}
