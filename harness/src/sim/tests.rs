use leasequake_reports::history::HistoryLine;
use leasequake_reports::Verdict;

use std::sync::Arc;

use super::run_seed;
use crate::job::Variant;

fn scenario() -> crate::scenario::Scenario {
    let text = "name = \"sim\"\ndescription = \"d\"\nincident = \"i\"\nduration_s = 30\n[nodes]\ncount = 3\n\
                [lease]\nttl_ms = 1500\n[store]\npolicy = \"enforce\"\nfence_source = \"redis\"\n";
    crate::scenario::parse(std::path::Path::new("sim.toml"), text).unwrap()
}

fn text(lines: &[HistoryLine]) -> String {
    lines.iter().map(|l| serde_json::to_string(l).unwrap() + "\n").collect()
}

#[test]
fn the_reference_node_syncs_in_the_simulation_and_a_seed_gives_one_history() {
    let s = scenario();
    let a = run_seed(&s, 7, 20, &reference()).unwrap();
    assert_eq!(a.result.verdict, Verdict::Pass, "{:?}", a.result);
    let syncs: u64 = a.result.metrics.nodes.values().map(|n| n.syncs).sum();
    assert!(syncs >= 3, "the nodes synced ({syncs})");
    let b = run_seed(&s, 7, 20, &reference()).unwrap();
    assert_eq!(text(&a.lines), text(&b.lines), "the same seed gives the same history, byte for byte");
    let c = run_seed(&s, 8, 20, &reference()).unwrap();
    assert_ne!(text(&a.lines), text(&c.lines), "another seed another history");
}

fn reference() -> Arc<Variant> {
    Arc::new(Variant::reference())
}

#[test]
fn seeds_with_faults_replay_byte_for_byte() {
    let s = scenario();
    let mut with_faults = 0;
    for seed in 100..110 {
        let faults = super::schedule(&s, seed, 20);
        with_faults += usize::from(!faults.is_empty());
        let a = run_seed(&s, seed, 20, &reference()).unwrap();
        let b = run_seed(&s, seed, 20, &reference()).unwrap();
        assert_eq!(
            super::seeds::history_hash(&a.lines),
            super::seeds::history_hash(&b.lines),
            "seed {seed} ({} faults)",
            faults.len()
        );
        let applied = a
            .lines
            .iter()
            .filter(
                |l| matches!(l, HistoryLine::Fault(f) if f.phase == leasequake_reports::history::FaultPhase::Verified),
            )
            .count();
        assert_eq!(applied, faults.len(), "seed {seed}: every drawn fault took effect");
    }
    assert!(with_faults >= 8, "the seeds drew faults ({with_faults} of 10)");
}

#[test]
fn a_reset_costs_a_round_trip_so_a_client_retrying_at_once_cannot_stop_the_clock() {
    // The renewal-errors-ignored flaw retries at once on an error: with resets answered at no
    // virtual cost, its world spun forever at one instant (seen: seeds that never ended).
    let rt = tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
    rt.block_on(async {
        let link = Arc::new(super::net::Link::default());
        let far = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
        link.set(|l| l.reset_until = Some(far));
        let redis = super::cluster::Cluster::new(std::time::Duration::from_millis(2), super::env::VClock::start());
        let latency = std::time::Duration::from_micros(250);
        let began = tokio::time::Instant::now();
        let got = super::net::redis_request(link, redis, vec![b"PING".to_vec()], latency, None).await;
        assert!(got.is_err(), "a reset link answers with an error");
        // (tokio's timers round up to the millisecond)
        assert!(began.elapsed() >= 2 * latency, "the error came back after a round trip: {:?}", began.elapsed());
    });
}

/// Redis's fence counter behind an enforcing store: a restart without persistence starts the
/// counter from zero and the store refuses every lower fence (the hazard
/// scenarios/hazards/redis-fences-after-redis-restart declares): the correct lease fails
/// `liveness`. Two faults beside the restart change nothing.
const RESTART_HAZARD: &str = "name = \"restart-hazard\"\ndescription = \"d\"\nincident = \"i\"\nduration_s = 30\n\
    [nodes]\ncount = 3\n[lease]\nttl_ms = 1500\n[store]\npolicy = \"enforce\"\nfence_source = \"redis\"\n\
    [sentinel]\ndown_after_ms = 5000\n\
    [[faults]]\nkind = \"slow_model\"\ntarget = \"n2\"\nat_s = 3\nduration_s = 2\nlatency_ms = 200\n\
    [[faults]]\nkind = \"slow_store\"\nat_s = 8\nduration_s = 3\nlatency_ms = 100\n\
    [[faults]]\nkind = \"redis_restart\"\nat_s = 15\nduration_s = 4\n";

#[test]
fn a_failing_schedule_shrinks_to_the_fault_that_matters_and_exports_a_scenario_that_fails_again() {
    let dir = std::env::temp_dir().join(format!("leasequake-shrink-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("restart-hazard.toml");
    std::fs::write(&file, RESTART_HAZARD).unwrap();
    let s = crate::scenario::load(&file).unwrap();
    let variant = reference();
    let faults = super::schedule(&s, 5, 30);
    assert_eq!(faults.len(), 3, "the sim runs the file's own faults");
    let run = super::run_schedule(&s, 5, 30, faults.clone(), &variant).unwrap();
    assert!(super::shrink::violates(&run, "liveness"), "{:?}", run.result);
    let search =
        super::shrink::Search { scenario: &s, seed: 5, virtual_s: 30, variant: &variant, property: "liveness" };
    let mut steps = 0;
    let shrunk = search.shrink(faults, run, super::shrink::Budget::default(), |_| steps += 1).unwrap();
    assert!(!shrunk.budget_spent && steps > 3);
    let kinds: Vec<_> = shrunk.faults.iter().map(|f| f.kind).collect();
    assert_eq!(kinds, [crate::scenario::FaultKind::RedisRestart], "only the restart matters");
    assert!(shrunk.faults[0].duration_ms() < 4000, "and it got shorter: {}", shrunk.faults[0].duration_ms());
    let origin = super::export::Origin {
        file: &file,
        seed: 5,
        virtual_s: 30,
        property: "liveness",
        flaw: None,
        attempts: shrunk.attempts,
        nodes: 3,
        found: "2026-12-05",
        hazard: true,
    };
    let text = super::export::scenario_text(&origin, &shrunk.faults).unwrap();
    let exported = crate::scenario::parse(std::path::Path::new("x.toml"), &text).unwrap();
    assert_eq!(exported.expected.as_ref().map(|e| e.property.as_str()), Some("liveness"), "{text}");
    // Not declared a hazard (no --as-hazard): a plain scenario the correct lease must pass, its
    // finding kept as the origin.
    let plain =
        super::export::scenario_text(&super::export::Origin { hazard: false, ..origin }, &shrunk.faults).unwrap();
    let plain = crate::scenario::parse(std::path::Path::new("x.toml"), &plain).unwrap();
    assert!(plain.expected.is_none(), "{:?}", plain.expected);
    assert!(plain.incident.contains("must pass"), "{}", plain.incident);
    assert_eq!(plain.origin.as_ref().map(|o| o.property.as_str()), Some("liveness"));
    let from = exported.origin.as_ref().expect("an export says where it came from");
    assert_eq!((from.seed, from.property.as_str(), from.shrink_runs), (Some(5), "liveness", shrunk.attempts));
    assert_eq!(exported.faults.len(), 1);
    assert_eq!(exported.faults[0].at_ms(), shrunk.faults[0].at_ms(), "the ms survive the file");
    let again = run_seed(&exported, 5, 30, &variant).unwrap();
    assert!(super::shrink::violates(&again, "liveness"), "the exported file fails again: {text}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_slowed_model_runs_at_its_own_speed_again_after_the_heal() {
    // Seen: the heal was "ended at its time" and the node's model stayed slow for good, so a
    // seed's liveness failed on the simulation's bug, not the lease's.
    let text = "name = \"slow-model\"\ndescription = \"d\"\nincident = \"i\"\nduration_s = 20\n[nodes]\ncount = 1\n\
                [lease]\nttl_ms = 1500\n[store]\npolicy = \"enforce\"\nfence_source = \"store\"\n\
                [[faults]]\nkind = \"slow_model\"\ntarget = \"n1\"\nat_s = 3\nduration_s = 2\nlatency_ms = 400\n";
    let s = crate::scenario::parse(std::path::Path::new("slow.toml"), text).unwrap();
    let run = run_seed(&s, 1, 20, &reference()).unwrap();
    let model_ms = |from_s: u64, to_s: u64| -> Vec<u64> {
        run.lines
            .iter()
            .filter_map(|l| match l {
                HistoryLine::Node { received_ns, event, .. }
                    if (from_s * 1_000_000_000..to_s * 1_000_000_000).contains(&(received_ns - 1_000_000_000)) =>
                {
                    serde_json::to_value(event)
                        .ok()
                        .filter(|e| e["type"] == "model_call")
                        .and_then(|e| e["ms"].as_u64())
                }
                _ => None,
            })
            .collect()
    };
    assert!(model_ms(4, 5).iter().any(|ms| *ms >= 500), "slow inside the window: {:?}", model_ms(4, 5));
    let after = model_ms(7, 20);
    assert!(!after.is_empty() && after.iter().all(|ms| *ms < 200), "at its own speed after the heal: {after:?}");
}

#[test]
fn a_task_that_spins_at_one_instant_is_held_and_the_seed_is_inconclusive_not_endless() {
    // A busy loop that never waits on a timer keeps a paused-time runtime from ever idling, so
    // virtual time would never move again (seen: a flaw's `lost()` looping on a passed deadline).
    let rt = tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
    let gate = Arc::new(super::gate::Gate::default());
    rt.block_on(async {
        let spin = super::gate::Gated::new(vec![gate.clone()], async {
            loop {
                tokio::task::yield_now().await;
            }
        });
        let spinner = tokio::spawn(spin);
        let began = tokio::time::Instant::now();
        tokio::time::sleep(std::time::Duration::from_secs(5)).await;
        assert!(began.elapsed() >= std::time::Duration::from_secs(5), "time moved on");
        spinner.abort();
    });
    assert!(gate.spun().is_some(), "the gate remembers the spin");
}

#[test]
fn every_drawn_schedule_is_one_a_scenario_file_may_hold_so_every_finding_can_be_exported() {
    // Seen: seeds drew a 1.4 s pause_writes, a key_loss lasting 2 s and write pauses where
    // Sentinel's down-after would fail the primary over on its own: the container lane refuses
    // all three, so such a finding could not be exported.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/sim");
    let files = crate::scenario::discover(&[root]);
    assert!(files.len() >= 3, "{files:?}");
    let mut drawn = std::collections::BTreeSet::new();
    for file in files {
        let s = crate::scenario::load(&file).unwrap();
        for seed in 1..=300 {
            let faults = super::schedule::draw(&s, seed, 60);
            drawn.extend(faults.iter().map(|f| f.kind));
            let origin = super::export::Origin {
                file: &file,
                seed,
                virtual_s: 60,
                property: "liveness",
                flaw: None,
                attempts: 0,
                nodes: s.nodes.count,
                found: "2026-12-05",
                hazard: false,
            };
            if let Err(e) = super::export::scenario_text(&origin, &faults) {
                panic!("{} seed {seed}: {e}\n{faults:#?}", file.display());
            }
        }
    }
    assert!(drawn.len() >= 12, "the draw still covers the kinds: {drawn:?}");
}

/// The hazard's configuration (no fencing) with one fault: `fault` is its `[[faults]]` body.
fn unfenced_with(fault: &str) -> crate::scenario::Scenario {
    let text = format!(
        "name = \"t\"\ndescription = \"d\"\nincident = \"i\"\nduration_s = 24\n[nodes]\ncount = 3\n\
         [lease]\nttl_ms = 1500\n[store]\npolicy = \"observe\"\nfence_source = \"redis\"\n[[faults]]\n{fault}\n"
    );
    crate::scenario::parse(std::path::Path::new("t.toml"), &text).unwrap()
}

fn fault_lines(lines: &[HistoryLine]) -> Vec<&leasequake_reports::history::FaultEvent> {
    lines.iter().filter_map(|l| if let HistoryLine::Fault(f) = l { Some(f) } else { None }).collect()
}

#[test]
fn a_triggered_fault_lands_at_its_event_and_the_node_holds_until_it_is_in() {
    use leasequake_reports::history::{EventKind, FaultPhase};
    let s = unfenced_with("kind = \"pause\"\ntarget = \"owner\"\non = \"checkpoint-7\"\nat_s = 3\nduration_s = 4");
    let run = super::run_schedule(&s, 1, 24, s.faults.clone(), &reference()).unwrap();
    let faults = fault_lines(&run.lines);
    let verified = faults.iter().find(|f| f.phase == FaultPhase::Verified).expect("the pause took effect");
    // The node that reported checkpoint 7's sync point at that instant is the one paused.
    let synced = run.lines.iter().any(|l| {
        matches!(l, HistoryLine::Node { node, received_ns, event, .. }
            if *node == verified.target && *received_ns == verified.at_ns
                && matches!(event.kind, EventKind::SyncPoint { number: 7, .. }))
    });
    assert!(synced, "applied at {} ns on {}, not at a checkpoint 7 of it", verified.at_ns, verified.target);
    assert!(verified.at_ns > 3_000_000_000, "armed at 3 s, fired later");
    // Paused between its last check and its persist, longer than the ttl: without fencing, the
    // stale persist lands (the hazard's expected failure, as on containers).
    assert!(super::shrink::violates(&run, "no_stale_write"), "{:?}", run.result);
    // Applied at its time instead (no trigger), the pause lands anywhere: not a stale write.
    let mut timed = s.faults.clone();
    timed[0].on = None;
    let run = super::run_schedule(&s, 1, 24, timed, &reference()).unwrap();
    assert!(!super::shrink::violates(&run, "no_stale_write"), "the trigger made the difference");
}

#[test]
fn a_trigger_that_never_fires_or_that_the_world_cannot_see_fails_the_fault() {
    use leasequake_reports::history::FaultPhase;
    // No round aborts in a run without faults; the observer's sightings fire nothing here yet.
    let cases = [
        ("round_aborted", "owner", "did not happen within"),
        ("key_expired", "owner", "observer"),
        ("role_changed", "n2", "observer"),
    ];
    for (on, target, says) in cases {
        let body = format!("kind = \"pause\"\ntarget = \"{target}\"\non = \"{on}\"\nat_s = 3\nduration_s = 2");
        let s = unfenced_with(&body);
        let run = super::run_schedule(&s, 1, 24, s.faults.clone(), &reference()).unwrap();
        let faults = fault_lines(&run.lines);
        let failed = faults.iter().find(|f| f.phase == FaultPhase::Failed);
        assert!(failed.is_some_and(|f| f.detail.contains(says)), "{on}: {faults:?}");
        assert!(faults.iter().all(|f| f.phase != FaultPhase::Verified), "{on}: never applied: {faults:?}");
        assert_eq!(run.result.verdict, Verdict::Inconclusive, "{on}: a fault that failed: {:?}", run.result);
    }
}

#[test]
fn a_swarm_draw_enables_a_subset_per_seed_and_waits_for_pipeline_steps_leaving_the_plain_draw_as_it_was() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/sim");
    let plain = crate::scenario::load(&root.join("recommended.toml")).unwrap();
    let swarm = crate::scenario::load(&root.join("swarm.toml")).unwrap();
    let mut off = plain.clone();
    off.sim = Some(crate::scenario::SimDraw::default());
    let (mut kinds_per_seed, mut triggered, mut phases) = (Vec::new(), 0, std::collections::BTreeSet::new());
    for seed in 1..=200 {
        // The subset and the triggers draw from streams of their own: the plain draw is unchanged.
        assert_eq!(super::schedule::draw(&plain, seed, 60), super::schedule::draw(&off, seed, 60), "seed {seed}");
        let faults = super::schedule::draw(&swarm, seed, 60);
        let enabled = super::schedule::enabled(true, seed);
        assert!(faults.iter().all(|f| enabled.contains(&f.kind)), "seed {seed}: {enabled:?} {faults:?}");
        kinds_per_seed.push(enabled.len());
        for f in faults.iter().filter(|f| f.on.is_some()) {
            triggered += 1;
            assert_eq!(f.target.as_deref(), Some("owner"), "{f:?}");
            assert!(f.kind.needs_a_node(), "{f:?}");
            phases.insert(f.on.clone().unwrap());
        }
    }
    assert!(triggered >= 100, "about half the node faults wait for a step ({triggered})");
    for step in ["checkpoint-3", "checkpoint-4", "checkpoint-5", "store_call_sent:switch_alias"] {
        assert!(phases.contains(step), "{step} never drawn: {phases:?}");
    }
    let (few, all) = (kinds_per_seed.iter().filter(|k| **k <= 4).count(), super::schedule::KINDS.len());
    assert!(few >= 5, "some seeds enable only a few kinds ({few} of 200)");
    assert!(kinds_per_seed.iter().all(|k| (1..all).contains(k)), "never all {all} kinds: {kinds_per_seed:?}");
}

#[test]
fn an_aimed_lose_replies_loses_the_reply_to_the_next_such_command_only_in_the_simulation_too() {
    use leasequake_reports::wire::{LeaseOp, Scripts};
    // The reply of the owner's next renewal, then of some node's next release: each once, each
    // marked lost in the witness's record, as the proxy marks it; the lease rides them out.
    for (aimed, op) in [("renewal", LeaseOp::Renew), ("release", LeaseOp::Release), ("acquire", LeaseOp::Acquire)] {
        // Rounds of several renewal intervals, so the holder renews within one.
        let text = format!(
            "name = \"t\"\ndescription = \"d\"\nincident = \"i\"\nduration_s = 24\n[nodes]\ncount = 3\n\
             [lease]\nttl_ms = 1500\n[pipeline]\nembed_ms = 400\n[store]\npolicy = \"observe\"\nfence_source = \"redis\"\n\
             [[faults]]\nkind = \"lose_replies\"\ntarget = \"n1\"\ncommand = \"{aimed}\"\nat_s = 2\nduration_s = 8\n"
        );
        let s = crate::scenario::parse(std::path::Path::new("t.toml"), &text).unwrap();
        let run = super::run_schedule(&s, 3, 24, s.faults.clone(), &reference()).unwrap();
        let scripts = Scripts::learn(run.lines.iter().filter_map(|l| match l {
            HistoryLine::Wire(r) => Some(r),
            _ => None,
        }));
        let wire: Vec<_> = run
            .lines
            .iter()
            .filter_map(|l| if let HistoryLine::Wire(r) = l { Some(r) } else { None })
            .filter(|r| r.link == "n1-redis")
            .collect();
        let lost: Vec<_> = wire.iter().filter(|r| r.lost).collect();
        assert_eq!(lost.len(), 1, "{aimed}: one reply lost, once: {lost:?}");
        let at = wire.iter().position(|r| r.lost).unwrap();
        let read =
            leasequake_reports::wire::lease_op(lost[0], wire[..at].iter().copied(), super::world::LEASE_KEY, &scripts);
        assert_eq!(read, Some(op), "{aimed}: {:?}", lost[0].request);
        assert!(lost[0].reply.is_some() && lost[0].reply_ns.is_none(), "it ran, its reply never came");
        assert_ne!(run.result.verdict, Verdict::Fail, "{aimed}: {:?}", run.result);
    }
}

#[test]
fn a_slow_redis_aimed_at_renewals_delays_their_requests_alone_in_the_simulation() {
    use leasequake_reports::wire::{LeaseOp, Scripts};
    let text = "name = \"t\"\ndescription = \"d\"\nincident = \"i\"\nduration_s = 24\n[nodes]\ncount = 3\n\
                [lease]\nttl_ms = 1500\n[pipeline]\nembed_ms = 400\n[store]\npolicy = \"observe\"\nfence_source = \"redis\"\n\
                [[faults]]\nkind = \"slow_redis\"\ntarget = \"n1\"\ncommand = \"renewal\"\nlatency_ms = 300\nat_s = 2\nduration_s = 8\n";
    let s = crate::scenario::parse(std::path::Path::new("t.toml"), text).unwrap();
    let run = super::run_schedule(&s, 3, 24, s.faults.clone(), &reference()).unwrap();
    let wire: Vec<_> = run
        .lines
        .iter()
        .filter_map(|l| if let HistoryLine::Wire(r) = l { Some(r) } else { None })
        .filter(|r| r.link == "n1-redis" && (2_500_000_000..9_500_000_000).contains(&r.sent_ns))
        .collect();
    let scripts =
        Scripts::learn(run.lines.iter().filter_map(|l| if let HistoryLine::Wire(r) = l { Some(r) } else { None }));
    let took = |want: LeaseOp| -> Vec<u64> {
        wire.iter()
            .enumerate()
            .filter(|(i, r)| {
                leasequake_reports::wire::lease_op(r, wire[..*i].iter().copied(), super::world::LEASE_KEY, &scripts)
                    == Some(want)
            })
            .filter_map(|(_, r)| Some((r.reply_ns? - r.sent_ns) / 1_000_000))
            .collect()
    };
    let (renewals, checks) = (took(LeaseOp::Renew), took(LeaseOp::Check));
    assert!(!renewals.is_empty() && renewals.iter().all(|ms| *ms >= 300), "renewals slowed: {renewals:?}");
    assert!(!checks.is_empty() && checks.iter().all(|ms| *ms < 300), "checks at full speed: {checks:?}");
}

mod any_history {
    //! Any number in a real history (the simulation's, with wire, model and audit lines) set to
    //! any value: the checker judges it, never panics, never wraps (proptest).
    use leasequake_reports::history::HistoryLine;
    use proptest::prelude::*;
    use std::sync::OnceLock;

    fn history() -> &'static Vec<serde_json::Value> {
        static LINES: OnceLock<Vec<serde_json::Value>> = OnceLock::new();
        LINES.get_or_init(|| {
            let s = super::scenario();
            let run = super::run_seed(&s, 104, 5, &super::reference()).unwrap();
            run.lines.iter().map(|l| serde_json::to_value(l).unwrap()).collect()
        })
    }

    /// The paths to every number in `v`.
    fn numbers(v: &serde_json::Value, at: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        match v {
            serde_json::Value::Number(_) => out.push(at.clone()),
            serde_json::Value::Object(m) => m.iter().for_each(|(k, x)| {
                at.push(k.clone());
                numbers(x, at, out);
                at.pop();
            }),
            serde_json::Value::Array(a) => a.iter().enumerate().for_each(|(i, x)| {
                at.push(i.to_string());
                numbers(x, at, out);
                at.pop();
            }),
            _ => {}
        }
    }

    fn set(v: &mut serde_json::Value, path: &[String], to: serde_json::Value) {
        let Some((first, rest)) = path.split_first() else {
            *v = to;
            return;
        };
        let next = match v {
            serde_json::Value::Object(m) => m.get_mut(first),
            serde_json::Value::Array(a) => first.parse::<usize>().ok().and_then(|i| a.get_mut(i)),
            _ => None,
        };
        if let Some(n) = next {
            set(n, rest, to);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
        #[test]
        fn any_number_of_any_line_set_to_any_value_is_judged_without_a_panic(
            line in any::<prop::sample::Index>(),
            which in any::<prop::sample::Index>(),
            to in prop_oneof![
                Just(u64::MAX),
                Just(0u64),
                Just(i64::MAX as u64),
                Just(i64::MAX as u64 + 1),
                any::<u64>(),
            ],
            edits in 1usize..4,
        ) {
            let mut lines = history().clone();
            for k in 0..edits {
                let i = line.index(lines.len()).wrapping_add(k * 7) % lines.len();
                let mut paths = Vec::new();
                numbers(&lines[i], &mut Vec::new(), &mut paths);
                if paths.is_empty() {
                    continue;
                }
                let p = paths[which.index(paths.len())].clone();
                set(&mut lines[i], &p, serde_json::Value::from(to.wrapping_sub(k as u64)));
            }
            // A line the edit made unreadable is left out (as `check` on a file names it).
            let parsed: Vec<HistoryLine> = lines.into_iter().filter_map(|l| serde_json::from_value(l).ok()).collect();
            let _ = crate::check::check(&parsed);
        }
    }
}

/// Seed 1431 of sparse-checks (a failover, a stall of n1's renewal, a slow Redis link of n2's; it
/// does not shrink: without the third fault n3 never acquires in the window): n1 acquires on
/// the primary the failover has cut off, n3 on the promoted replica 145 ms later (a split brain no
/// lease sees without fencing), and n1, unable to renew, works to its own deadline. That is the
/// environment's doing: the run passes (before the checker counted the split brain's waste from
/// n3's acquire it read FAIL, "n1 worked 1153 ms ... (budget 700 ms)"). On the same schedule the
/// renewal-errors-ignored flaw still fails, in the same window (docs/sim.md).
#[test]
fn a_split_brain_the_failover_made_is_not_blamed_on_the_correct_lease() {
    use crate::scenario::FaultKind;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/sim/sparse-checks.toml");
    let s = crate::scenario::load(&root).unwrap();
    let faults = super::schedule(&s, 1431, 60);
    let kinds: Vec<_> = faults.iter().map(|f| f.kind).collect();
    assert_eq!(kinds, [FaultKind::Failover, FaultKind::StallRenewal, FaultKind::SlowRedis], "the draw changed");
    let run = super::run_schedule(&s, 1431, 60, faults, &reference()).unwrap();
    // The split brain happened: two acquisitions of n1 and n3 while the failover was in force.
    let acquired: Vec<(String, u64)> = run
        .lines
        .iter()
        .filter_map(|l| match l {
            HistoryLine::Node { node, event, .. }
                if matches!(event.kind, leasequake_reports::history::EventKind::Acquired { .. }) =>
            {
                Some((node.clone(), event.mono_ns))
            }
            _ => None,
        })
        .filter(|(_, at)| (42_600_000_000..42_900_000_000).contains(at))
        .collect();
    assert_eq!(acquired.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(), ["n1", "n3"], "{acquired:?}");
    assert_eq!(run.result.verdict, Verdict::Pass, "{:#?}", run.result.properties);
}
