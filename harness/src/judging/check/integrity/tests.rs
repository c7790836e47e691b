//! Damage cannot move a verdict: a damaged failing history stays FAIL or becomes INCONCLUSIVE,
//! a damaged passing one becomes INCONCLUSIVE unless the damage cannot matter.

use leasequake_reports::history::{EventKind, FaultPhase, HistoryLine, StoreOp, HISTORY_VERSION};
use leasequake_reports::Verdict;
use proptest::prelude::*;
use serde_json::Value;

use crate::check::check;
use crate::check::tests::{token, H};
use crate::history::seal;

/// A node that acts after reporting its loss (`sticky_loss`) and a stale write that lands
/// (`no_stale_write`), with faults and observer samples: every kind of line.
fn failing() -> Vec<HistoryLine> {
    let lost = EventKind::OwnershipLost { token: token("n1", 1), reason: "expired".into(), checkpoint: None };
    let call =
        EventKind::StoreCallSent { token: token("n1", 1), fence: 1, op: StoreOp::Upsert, call: 9, decided_ns: None };
    H::new()
        .event("n1", EventKind::Acquired { token: token("n1", 1), fence: 1, sent_ns: None })
        .round("n2", 2)
        .fault(1, FaultPhase::Requested)
        .fault(1, FaultPhase::Verified)
        .observe(Some("n2/f2"))
        .event("n1", lost)
        .event("n1", call)
        .write("n1", 1, StoreOp::PersistRecord, "c1", true)
        .fault(1, FaultPhase::Healed)
        .round("n2", 3)
        .end()
}

/// The same shape, correct: the loss ends the work, the stale write is refused.
fn passing() -> Vec<HistoryLine> {
    let lost = EventKind::OwnershipLost { token: token("n1", 1), reason: "expired".into(), checkpoint: None };
    let call =
        EventKind::StoreCallSent { token: token("n1", 1), fence: 1, op: StoreOp::Upsert, call: 9, decided_ns: None };
    H::new()
        .event("n1", EventKind::Acquired { token: token("n1", 1), fence: 1, sent_ns: None })
        .event("n1", call)
        .round("n2", 2)
        .fault(1, FaultPhase::Requested)
        .fault(1, FaultPhase::Verified)
        .observe(Some("n2/f2"))
        .event("n1", lost)
        .write("n1", 1, StoreOp::PersistRecord, "c1", false)
        .fault(1, FaultPhase::Healed)
        .round("n2", 3)
        .end()
}

fn verdict(h: &[HistoryLine]) -> Verdict {
    check(h).verdict
}

/// Every single-step damage: cut after each line, drop each, duplicate each, swap each pair,
/// move each to the end and to the start.
fn damaged(h: &[HistoryLine]) -> Vec<(String, Vec<HistoryLine>)> {
    let mut out = Vec::new();
    for i in 0..h.len() {
        out.push((format!("cut after line {}", i + 1), h[..=i].to_vec()));
        let mut d = h.to_vec();
        d.remove(i);
        out.push((format!("line {} dropped", i + 1), d));
        let mut d = h.to_vec();
        d.insert(i, h[i].clone());
        out.push((format!("line {} duplicated", i + 1), d));
        for j in i + 1..h.len() {
            let mut d = h.to_vec();
            d.swap(i, j);
            out.push((format!("lines {} and {} swapped", i + 1, j + 1), d));
        }
        let mut d = h.to_vec();
        let l = d.remove(i);
        d.push(l);
        out.push((format!("line {} moved to the end", i + 1), d));
        let mut d = h.to_vec();
        let l = d.remove(i);
        d.insert(0, l);
        out.push((format!("line {} moved to the start", i + 1), d));
    }
    out.push(("two histories concatenated".into(), [h, h].concat()));
    out
}

/// Every number in every line set to each of a few extremes, where the line still parses.
fn overflowed(h: &[HistoryLine]) -> Vec<(String, Vec<HistoryLine>)> {
    fn numbers(v: &Value, path: String, out: &mut Vec<String>) {
        match v {
            Value::Number(_) => out.push(path),
            Value::Object(m) => m.iter().for_each(|(k, v)| numbers(v, format!("{path}/{k}"), out)),
            Value::Array(a) => a.iter().enumerate().for_each(|(i, v)| numbers(v, format!("{path}/{i}"), out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    for (i, line) in h.iter().enumerate() {
        let json = serde_json::to_value(line).unwrap();
        let mut paths = Vec::new();
        numbers(&json, String::new(), &mut paths);
        for p in paths {
            for extreme in [Value::from(u64::MAX), Value::from(i64::MAX), Value::from(0u64), Value::from(1u64 << 62)] {
                let mut j = json.clone();
                *j.pointer_mut(&p).unwrap() = extreme.clone();
                if j == json {
                    continue;
                }
                let Ok(l) = serde_json::from_value::<HistoryLine>(j) else { continue };
                let mut d = h.to_vec();
                d[i] = l;
                out.push((format!("line {} {p} = {extreme}", i + 1), d));
            }
        }
    }
    out
}

#[test]
fn the_two_histories_are_what_they_claim() {
    assert_eq!(verdict(&failing()), Verdict::Fail, "{:?}", check(&failing()));
    assert_eq!(verdict(&passing()), Verdict::Pass, "{:?}", check(&passing()));
}

#[test]
fn no_damage_turns_a_failing_history_into_a_pass() {
    let h = failing();
    let cases = [damaged(&h), overflowed(&h)].concat();
    assert!(cases.len() > 500, "{} cases", cases.len());
    for (what, d) in cases {
        assert_ne!(verdict(&d), Verdict::Pass, "{what}: {:?}", check(&d).inconclusive);
    }
}

#[test]
fn damage_to_a_passing_history_is_inconclusive_unless_it_changed_nothing() {
    let h = passing();
    for (what, d) in [damaged(&h), overflowed(&h)].concat() {
        let v = verdict(&d);
        if d == h {
            assert_eq!(v, Verdict::Pass, "{what}: an identical history");
        } else {
            assert_eq!(v, Verdict::Inconclusive, "{what}: {:?}", check(&d));
        }
    }
}

#[test]
fn the_worked_examples_of_damage_are_inconclusive_and_named() {
    let h = failing();
    let node_lines: Vec<usize> =
        h.iter().enumerate().filter(|(_, l)| matches!(l, HistoryLine::Node { .. })).map(|(i, _)| i).collect();
    let last_audit = h.iter().rposition(|l| matches!(l, HistoryLine::Audit(_))).unwrap();
    let header_field = |f: &dyn Fn(&mut leasequake_reports::history::Header)| {
        let mut d = h.clone();
        if let HistoryLine::Header(hd) = &mut d[0] {
            f(hd);
        }
        d
    };
    let mut swapped = h.clone();
    swapped.swap(node_lines[1], node_lines[2]);
    let mut cut = h.clone();
    cut.remove(last_audit);
    let mut second_header = h.clone();
    second_header.insert(3, h[0].clone());
    let mut early_end = h.clone();
    if let HistoryLine::Header(hd) = &mut early_end[0] {
        hd.started_ns = 5;
    }
    if let Some(HistoryLine::Snapshot(s)) = early_end.last_mut() {
        s.ended_ns = 0;
    }
    let cases: Vec<(&str, Vec<HistoryLine>, &str)> = vec![
        ("node lines swapped", swapped, "go back in time"),
        ("the last audit record deleted", cut, "audit"),
        ("a second header", second_header, "a header after line 1"),
        ("the snapshot ends before the run", early_end, "before the header's `started_ns`"),
        ("audit_after at u64::MAX", header_field(&|hd| hd.audit_after = u64::MAX), "audit_after"),
        ("liveness bound at u64::MAX", header_field(&|hd| hd.liveness_bound_ms = u64::MAX), "liveness_bound_ms"),
    ];
    for (what, d, says) in cases {
        let r = check(&d);
        assert_eq!(r.verdict, Verdict::Inconclusive, "{what}: {r:?}");
        assert!(
            r.inconclusive.iter().any(|i| i.contains("damaged") && i.contains(says)),
            "{what}: {:?}",
            r.inconclusive
        );
    }
}

#[test]
fn a_resealed_history_is_judged_and_an_unsealed_older_one_says_so() {
    // Sealing again after an edit makes the edit part of the record: judged as written.
    let mut h = passing();
    seal(&mut h);
    assert_eq!(verdict(&h), Verdict::Pass);
    // Version 2 has no seal: judged by the rules it supports, with a note.
    let mut old = passing();
    if let HistoryLine::Header(hd) = &mut old[0] {
        hd.version = 2;
    }
    if let Some(HistoryLine::Snapshot(s)) = old.last_mut() {
        s.seal = None;
    }
    let r = check(&old);
    assert_eq!(r.verdict, Verdict::Pass, "{r:?}");
    assert!(r.notes.iter().any(|n| n.contains("could not be verified")), "{:?}", r.notes);
    // Version 3 or later without a seal is damaged.
    let mut unsealed = passing();
    if let Some(HistoryLine::Snapshot(s)) = unsealed.last_mut() {
        s.seal = None;
    }
    assert_eq!(verdict(&unsealed), Verdict::Inconclusive);
    assert_eq!(HISTORY_VERSION, 7);
    // A version 3 history, sealed as version 3 wrote it (no environment count), is still whole:
    // written out and read back, its digest matches.
    let mut three = passing();
    if let HistoryLine::Header(hd) = &mut three[0] {
        hd.version = 3;
    }
    seal(&mut three);
    let text: String = three.iter().map(|l| serde_json::to_string(l).unwrap() + "\n").collect();
    assert!(!text.contains("environment"), "{text}");
    let dir = std::env::temp_dir().join(format!("lq-v3-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("history.jsonl"), &text).unwrap();
    let read = crate::history::check_dir(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(read.map(|r| r.verdict).ok(), Some(Verdict::Pass));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Any reordering and any deletion of lines of a failing history never gives a PASS.
    #[test]
    fn no_permutation_or_deletion_of_a_failing_history_passes(
        order in Just((0..failing().len()).collect::<Vec<usize>>()).prop_shuffle(),
        keep in proptest::collection::vec(any::<bool>(), failing().len()),
    ) {
        let h = failing();
        let d: Vec<HistoryLine> = order.iter().filter(|i| keep[**i]).map(|i| h[*i].clone()).collect();
        prop_assert_ne!(verdict(&d), Verdict::Pass);
    }
}

#[test]
fn what_no_process_can_do_is_inconclusive_naming_it() {
    let judged = |h: &[HistoryLine]| {
        let mut h = h.to_vec();
        seal(&mut h);
        check(&h)
    };
    // A node's own clock 5 s back after its first event (its receipt stamps still in order).
    let mut back = passing();
    if let Some(HistoryLine::Node { event, .. }) =
        back.iter_mut().find(|l| matches!(l, HistoryLine::Node { node, .. } if node == "n1"))
    {
        event.mono_ns += 5_000_000_000;
    }
    let r = judged(&back);
    assert_eq!(r.verdict, Verdict::Inconclusive, "{r:?}");
    assert!(r.inconclusive.iter().any(|i| i.contains("own clock (mono_ns) went")), "{:?}", r.inconclusive);
    // Incarnation 1 -> 2 -> 1.
    let mut reused = passing();
    let mut seen = 0;
    for l in &mut reused {
        if let HistoryLine::Node { node, incarnation, .. } = l {
            if node == "n1" {
                seen += 1;
                *incarnation = if seen == 2 { 2 } else { 1 };
            }
        }
    }
    let r = judged(&reused);
    assert_eq!(r.verdict, Verdict::Inconclusive, "{r:?}");
    assert!(r.inconclusive.iter().any(|i| i.contains("never reused")), "{:?}", r.inconclusive);
    // A sealed history whose header was set back to version 2 (which has no seal).
    let mut downgraded = passing();
    if let HistoryLine::Header(hd) = &mut downgraded[0] {
        hd.version = 2;
    }
    let r = check(&downgraded);
    assert_eq!(r.verdict, Verdict::Inconclusive, "{r:?}");
    assert!(r.inconclusive.iter().any(|i| i.contains("only version 3 and later")), "{:?}", r.inconclusive);
    // A few ms back (threads reading the clock before their turn to write) is no damage.
    let mut jitter = passing();
    let mut seen = 0;
    for l in &mut jitter {
        if let HistoryLine::Node { node, event, .. } = l {
            if node == "n1" {
                seen += 1;
                if seen == 2 {
                    event.mono_ns = event.mono_ns.saturating_sub(3_000_000);
                }
            }
        }
    }
    assert_eq!(judged(&jitter).verdict, Verdict::Pass);
}
