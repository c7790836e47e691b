use leasequake_reports::history::{
    AuditRecord, EnvChange, EnvEvent, EventKind, ExpectedFailure, FaultEvent, FaultKind, FaultPhase, FenceSource,
    Header, HistoryLine, LinkCut, NodeEvent, ObserverSample, Snapshot, StoreOp, StorePolicy,
};
use leasequake_reports::{Expectation, PropertyStatus, Verdict};

use super::check;

const MS: u64 = 1_000_000;

/// Builds histories: every line one step of 1 ms later than the last.
pub(super) struct H {
    lines: Vec<HistoryLine>,
    seq: u64,
    t: u64,
    /// The collection the last whole round made live.
    live: Option<String>,
}

pub(super) fn header(expected: Option<&str>) -> Header {
    Header {
        version: leasequake_reports::history::HISTORY_VERSION,
        run_id: "r".into(),
        scenario: "s".into(),
        seed: 1,
        tenant: "t".into(),
        policy: StorePolicy::Enforce,
        fence_source: FenceSource::Redis,
        expected: expected.map(|p| ExpectedFailure {
            property: p.into(),
            why: "shown on purpose".into(),
            also: vec![],
        }),
        liveness_bound_ms: 1_000,
        node_silence_ms: 10_000,
        observer_gap_ms: 10_000,
        started_ns: 0,
        audit_after: 0,
        renew_ms: None,
        ttl_ms: None,
        waste_budget_ms: None,
        node_command: None,
        clients_follow: false,
        round_estimate_ms: None,
        model_after: 0,
        witness: false,
    }
}

impl H {
    pub(super) fn new() -> Self {
        Self::expecting(None)
    }
    /// A history whose header records a renewal interval.
    pub(super) fn renewing_every(ms: u64) -> Self {
        let mut h = Self::new();
        if let HistoryLine::Header(hd) = &mut h.lines[0] {
            hd.renew_ms = Some(ms);
        }
        h
    }
    pub(super) fn expecting(property: Option<&str>) -> Self {
        Self { lines: vec![HistoryLine::Header(header(property))], seq: 0, t: 0, live: None }
    }
    pub(super) fn tick(&mut self) -> u64 {
        self.t += MS;
        self.t
    }
    pub(super) fn write(mut self, node: &str, fence: u64, op: StoreOp, collection: &str, accepted: bool) -> Self {
        self.seq += 1;
        let at = self.tick();
        self.lines.push(HistoryLine::Audit(AuditRecord {
            seq: self.seq,
            mono_ns: at,
            tenant: "t".into(),
            node: node.into(),
            token: format!("{node}/f{fence}"),
            fence,
            op,
            collection: Some(collection.into()),
            accepted,
            reason: (!accepted).then(|| "stale fence".into()),
            alias_version: (op == StoreOp::SwitchAlias).then_some(fence),
            call: self.seq,
        }));
        self
    }
    /// A whole, accepted round: create, upsert, switch, persist, then drop the collection that
    /// was live before (as the reference job does).
    pub(super) fn round(self, node: &str, fence: u64) -> Self {
        let c = format!("c{fence}");
        let before = self.live.clone();
        let mut h = self
            .write(node, fence, StoreOp::CreateCollection, &c, true)
            .write(node, fence, StoreOp::Upsert, &c, true)
            .write(node, fence, StoreOp::SwitchAlias, &c, true)
            .write(node, fence, StoreOp::PersistRecord, &c, true);
        if let Some(old) = before.filter(|old| *old != c) {
            h = h.write(node, fence, StoreOp::DropCollection, &old, true);
        }
        h.live = Some(c);
        h
    }
    pub(super) fn event(mut self, node: &str, kind: EventKind) -> Self {
        let at = self.tick();
        self.lines.push(HistoryLine::Node {
            node: node.into(),
            incarnation: 1,
            received_ns: at,
            event: NodeEvent { mono_ns: at, round: 1, kind },
        });
        self
    }
    pub(super) fn fault(self, id: u64, phase: FaultPhase) -> Self {
        self.fault_of(FaultKind::Pause, id, phase)
    }
    pub(super) fn fault_of(mut self, kind: FaultKind, id: u64, phase: FaultPhase) -> Self {
        let at = self.tick();
        self.lines.push(HistoryLine::Fault(FaultEvent {
            id,
            fault: kind,
            target: "n1".into(),
            phase,
            at_ns: at,
            detail: String::new(),
            redis_link: None,
            outlasts_ms: None,
        }));
        self
    }
    /// A fault on n1, verified (a partition's verification says how the Redis link was cut).
    pub(super) fn fault_seen(self, kind: FaultKind, id: u64, redis_link: Option<LinkCut>) -> Self {
        let mut h = self.fault_of(kind, id, FaultPhase::Requested);
        let at = h.tick();
        h.lines.push(HistoryLine::Fault(FaultEvent {
            id,
            fault: kind,
            target: "n1".into(),
            phase: FaultPhase::Verified,
            at_ns: at,
            detail: String::new(),
            redis_link,
            outlasts_ms: None,
        }));
        h
    }
    /// An environment event about `subject`, seen by Docker.
    pub(super) fn env(mut self, change: EnvChange, subject: &str) -> Self {
        let at = self.tick();
        self.lines.push(HistoryLine::Environment(EnvEvent {
            change,
            subject: subject.into(),
            source: "docker".into(),
            at_ns: at,
            detail: "the container stopped (exit code 137)".into(),
        }));
        self
    }
    pub(super) fn observe(mut self, holder: Option<&str>) -> Self {
        let at = self.tick();
        self.lines.push(HistoryLine::Observer(ObserverSample {
            instance: "redis-primary".into(),
            at_ns: at,
            holder: holder.map(str::to_owned),
            ttl_ms: Some(100),
            role: Some("master".into()),
            error: None,
            asked_ns: None,
        }));
        self
    }
    /// An observer sample of `instance` in `role`, holding no key.
    pub(super) fn role(mut self, instance: &str, role: &str) -> Self {
        let at = self.tick();
        self.lines.push(HistoryLine::Observer(ObserverSample {
            instance: instance.into(),
            at_ns: at,
            holder: None,
            ttl_ms: None,
            role: Some(role.into()),
            error: None,
            asked_ns: None,
        }));
        self
    }
    pub(super) fn wait(mut self, ms: u64) -> Self {
        self.t += ms * MS;
        self
    }
    pub(super) fn end(mut self) -> Vec<HistoryLine> {
        let at = self.tick();
        self.lines.push(HistoryLine::Snapshot(Snapshot {
            ended_ns: at,
            faults_still_applied: vec![],
            temporary_collections_left: vec![],
            extended_ms: None,
            versions: Default::default(),
            witness_gaps: Vec::new(),
            stopped: None,
            seal: None,
        }));
        crate::history::seal(&mut self.lines);
        self.lines
    }
}

pub(super) fn token(node: &str, fence: u64) -> String {
    format!("{node}/f{fence}")
}

#[track_caller]
fn status(history: &[HistoryLine], property: &str) -> PropertyStatus {
    let r = check(history);
    r.properties.iter().find(|p| p.name == property).unwrap_or_else(|| panic!("no property {property}")).status
}

#[test]
fn a_clean_history_passes_every_property() {
    let h = H::new().round("n1", 1).round("n2", 2).round("n1", 3).end();
    let r = check(&h);
    assert_eq!(r.verdict, Verdict::Pass, "{r:#?}");
    for p in &r.properties {
        // This history holds audit records only: no node event, so no acquisition to judge (its
        // end, its validity, its renewals); no waste budget is declared; no witness recorded.
        let na = ["sticky_loss", "acquisitions_end", "within_validity", "keeps_renewing", "bounded_waste"]
            .contains(&p.name.as_str())
            || p.name.starts_with("wire_")
            || p.name == "testimony";
        let want = if na { PropertyStatus::NotApplicable } else { PropertyStatus::Held };
        assert_eq!(p.status, want, "{p:?}");
    }
}

#[test]
fn a_history_whose_snapshot_says_the_run_was_stopped_is_inconclusive_and_the_seal_keeps_it_said() {
    let mut h = H::new().round("n1", 1).round("n2", 2).end();
    let Some(HistoryLine::Snapshot(s)) = h.last_mut() else { panic!("no snapshot") };
    s.stopped = Some("the run was stopped early: Ctrl-C".into());
    crate::history::seal(&mut h);
    let r = check(&h);
    assert_eq!(r.verdict, Verdict::Inconclusive, "{r:#?}");
    assert!(r.inconclusive.iter().any(|i| i.contains("stopped early: Ctrl-C")), "{:?}", r.inconclusive);
    // Taking the word out of a sealed history is damage, never a pass.
    let Some(HistoryLine::Snapshot(s)) = h.last_mut() else { panic!("no snapshot") };
    s.stopped = None;
    assert_eq!(check(&h).verdict, Verdict::Inconclusive);
}

#[test]
fn a_write_under_an_older_fence_after_a_newer_one_is_a_stale_write_naming_both_and_the_faults() {
    let h = H::new()
        .round("n2", 2)
        .fault(1, FaultPhase::Requested)
        .fault(1, FaultPhase::Verified)
        .write("n1", 1, StoreOp::PersistRecord, "c1", true)
        .fault(1, FaultPhase::Healed)
        .round("n2", 3)
        .end();
    let r = check(&h);
    assert_eq!(r.verdict, Verdict::Fail);
    let p = r.properties.iter().find(|p| p.name == "no_stale_write").unwrap();
    assert_eq!((p.status, p.violation_count), (PropertyStatus::Violated, 1));
    let v = &p.violations[0];
    let fences: Vec<u64> = v.evidence.iter().map(|e| e.fence).collect();
    assert_eq!(fences, [2, 1], "newer write, then the stale one");
    assert_eq!(v.faults_active, ["#1 pause on n1"]);
}

#[test]
fn a_rejected_stale_write_is_no_violation_and_is_counted_as_fenced() {
    let h = H::new().round("n2", 2).write("n1", 1, StoreOp::PersistRecord, "c1", false).round("n2", 3).end();
    assert_eq!(status(&h, "no_stale_write"), PropertyStatus::Held);
    assert_eq!(check(&h).metrics.fenced_rejections, 1);
}

#[test]
fn two_owners_with_one_fence_are_a_fence_anomaly() {
    let mut h = H::new().round("n1", 1);
    h = h.write("n2", 1, StoreOp::CreateCollection, "other", true);
    // Same fence, other token: n2's token is "n2/f1".
    assert_eq!(status(&h.end(), "fence_anomaly"), PropertyStatus::Violated);
    assert_eq!(status(&H::new().round("n1", 1).round("n1", 2).end(), "fence_anomaly"), PropertyStatus::Held);
}

#[test]
fn acting_after_reporting_a_loss_violates_sticky_loss() {
    let lost = |h: H| {
        h.event("n1", EventKind::OwnershipLost { token: token("n1", 1), reason: "expired".into(), checkpoint: None })
    };
    let call =
        EventKind::StoreCallSent { token: token("n1", 1), fence: 1, op: StoreOp::Upsert, call: 9, decided_ns: None };
    let pass = EventKind::CheckpointPassed { token: token("n1", 1), number: 7, decided_ns: None };
    assert_eq!(status(&lost(H::new()).event("n1", call.clone()).end(), "sticky_loss"), PropertyStatus::Violated);
    assert_eq!(status(&lost(H::new()).event("n1", pass.clone()).end(), "sticky_loss"), PropertyStatus::Violated);
    assert_eq!(
        status(&H::new().event("n1", call).event("n1", pass).end(), "sticky_loss"),
        PropertyStatus::NotApplicable
    );
    // Another acquisition (another token) may act after an older one was lost.
    let next =
        EventKind::StoreCallSent { token: token("n1", 2), fence: 2, op: StoreOp::Upsert, call: 10, decided_ns: None };
    assert_eq!(status(&lost(H::new()).event("n1", next).end(), "sticky_loss"), PropertyStatus::Held);
}

#[test]
fn a_collection_written_by_two_owners_or_a_falling_alias_version_violates_single_writer() {
    let two = H::new()
        .write("n1", 1, StoreOp::CreateCollection, "c", true)
        .write("n2", 2, StoreOp::Upsert, "c", true)
        .write("n1", 1, StoreOp::SwitchAlias, "c", true)
        .end();
    assert_eq!(status(&two, "single_writer"), PropertyStatus::Violated);
    let mut falling = H::new().round("n1", 5).write("n2", 3, StoreOp::CreateCollection, "c3", true);
    falling = falling.write("n2", 3, StoreOp::SwitchAlias, "c3", true);
    assert_eq!(status(&falling.end(), "single_writer"), PropertyStatus::Violated);
    assert_eq!(status(&H::new().end(), "single_writer"), PropertyStatus::NotApplicable);
}

#[test]
fn a_leftover_temporary_collection_fails_cleanup() {
    let aborted = |h: H| h.write("n1", 1, StoreOp::CreateCollection, "tmp1", true);
    assert_eq!(status(&aborted(H::new()).round("n2", 2).end(), "cleanup"), PropertyStatus::Violated);
    let dropped = aborted(H::new()).write("n2", 2, StoreOp::DropCollection, "tmp1", true).round("n2", 2).end();
    assert_eq!(status(&dropped, "cleanup"), PropertyStatus::Held);
    // An aborted round after the last completed one has no later owner to clean up after it.
    assert_eq!(status(&aborted(H::new().round("n2", 0)).end(), "cleanup"), PropertyStatus::Held);
}

#[test]
fn a_replaced_live_collection_a_later_round_leaves_behind_is_a_leak_naming_both_rounds() {
    // A job that never drops: c1 made live by n1, replaced by n2's c2; n3's round begins after
    // and leaves c1 there. c2, replaced by n3's switch, has no later round: not judged.
    let no_drops = |h: H| {
        let round =
            |h: H, node: &str, f: u64| {
                let c = format!("c{f}");
                h.write(node, f, StoreOp::BeginEpoch, "", true)
                    .write(node, f, StoreOp::CreateCollection, &c, true)
                    .write(node, f, StoreOp::SwitchAlias, &c, true)
            };
        round(round(round(h, "n1", 1), "n2", 2), "n3", 3)
    };
    let r = check(&no_drops(H::new()).end());
    let p = r.properties.iter().find(|p| p.name == "cleanup").unwrap();
    assert_eq!(p.status, PropertyStatus::Violated);
    assert_eq!(p.violations.len(), 1, "{:?}", p.violations);
    let summary = &p.violations[0].summary;
    assert!(
        summary.contains("collection c1 (made live by n1") && summary.contains("n3's round under fence 3"),
        "{summary}"
    );
    // The same rounds dropping what they replaced (the reference job): held.
    let dropping = H::new().round("n1", 1).round("n2", 2).round("n3", 3).end();
    assert_eq!(status(&dropping, "cleanup"), PropertyStatus::Held);
    // Rounds that begin no epoch at the store (fences from Redis): when they read the tenant is
    // not in the audit, so nothing is concluded.
    let unseen = |h: H, node: &str, f: u64| {
        let c = format!("c{f}");
        h.write(node, f, StoreOp::CreateCollection, &c, true).write(node, f, StoreOp::SwitchAlias, &c, true)
    };
    let redis_fenced = unseen(unseen(unseen(H::new(), "n1", 1), "n2", 2), "n3", 3).end();
    assert_eq!(status(&redis_fenced, "cleanup"), PropertyStatus::Held);
    // Dropped by the later round's sweep instead: held too.
    let swept = no_drops(H::new()).write("n4", 4, StoreOp::DropCollection, "c1", true).end();
    assert_eq!(status(&swept, "cleanup"), PropertyStatus::Held);
}

#[test]
fn a_fault_the_harness_could_not_undo_makes_the_run_inconclusive_never_a_fail() {
    let healed = || H::new().fault(1, FaultPhase::Requested).fault(1, FaultPhase::Verified);
    let ok = healed().fault(1, FaultPhase::Healed).round("n1", 2).end();
    assert_eq!(check(&ok).verdict, Verdict::Pass, "{:?}", check(&ok));
    // A heal on schedule that failed (version 5): the fault may have stayed in effect.
    let not_healed = healed().fault(1, FaultPhase::HealFailed).round("n1", 2).end();
    let r = check(&not_healed);
    assert_eq!(r.verdict, Verdict::Inconclusive, "{r:?}");
    assert!(r.inconclusive.iter().any(|w| w.contains("could not be healed")), "{:?}", r.inconclusive);
    // Left applied at the end (the snapshot's list): the same, and cleanup is not the lease's.
    let mut still = H::new().round("n1", 1).end();
    if let Some(HistoryLine::Snapshot(s)) = still.last_mut() {
        s.faults_still_applied.push(4);
    }
    let r = check(&still);
    assert_eq!(r.verdict, Verdict::Inconclusive, "{r:?}");
    assert!(r.inconclusive.iter().any(|w| w.contains("fault #4 was still applied")), "{:?}", r.inconclusive);
    assert_eq!(status(&still, "cleanup"), PropertyStatus::Held);
}

#[test]
fn liveness_needs_a_sync_within_the_bound_after_the_last_heal() {
    let healed =
        || H::new().fault(1, FaultPhase::Requested).fault(1, FaultPhase::Verified).fault(1, FaultPhase::Healed);
    assert_eq!(status(&healed().round("n1", 1).end(), "liveness"), PropertyStatus::Held);
    assert_eq!(status(&healed().wait(2_000).round("n1", 1).end(), "liveness"), PropertyStatus::Violated);
    let short = healed().wait(200).end();
    assert_eq!(status(&short, "liveness"), PropertyStatus::Inconclusive);
    assert_eq!(check(&short).verdict, Verdict::Inconclusive, "too short to judge is never a pass");
}

#[test]
fn a_forward_step_of_redis_s_clock_lengthens_liveness_by_what_it_outlasts_its_heal_and_nothing_else_does() {
    // Seen in the simulation (seed 727): a key written while the primary's clock ran 19.7 s ahead
    // kept its holder's lease 19.7 s past the heal, the holder crashed: no client can shorten it.
    // Bound 1000 ms; the heal says its effect outlasts it by 2000 ms; a sync 2500 ms later.
    let history = |kind: FaultKind, target: &str, outlasts_ms: Option<u64>, wait_ms: u64| {
        let mut h = H::new().fault_of(kind, 1, FaultPhase::Requested).fault_of(kind, 1, FaultPhase::Verified);
        let at = h.tick();
        h.lines.push(HistoryLine::Fault(FaultEvent {
            id: 1,
            fault: kind,
            target: target.into(),
            phase: FaultPhase::Healed,
            at_ns: at,
            detail: String::new(),
            redis_link: None,
            outlasts_ms,
        }));
        h.wait(wait_ms).round("n1", 1).wait(4_000).end()
    };
    let judged = |kind: FaultKind, target: &str, outlasts_ms: Option<u64>, wait_ms: u64| {
        let r = check(&history(kind, target, outlasts_ms, wait_ms));
        let p = r.properties.into_iter().find(|p| p.name == "liveness").unwrap();
        (p.status, p.sentence)
    };
    let (status, sentence) = judged(FaultKind::ClockJump, "redis-primary", Some(2_000), 2_500);
    assert_eq!(status, PropertyStatus::Held, "{sentence}");
    assert!(sentence.contains("outlasts its heal by 2000 ms"), "{sentence}");
    assert_eq!(judged(FaultKind::ClockJump, "redis-primary", None, 2_500).0, PropertyStatus::Violated);
    assert_eq!(judged(FaultKind::ClockJump, "redis-primary", Some(2_000), 3_500).0, PropertyStatus::Violated);
    // Believed of a clock step on Redis only: on a pause's line it lengthens nothing.
    assert_eq!(judged(FaultKind::Pause, "n1", Some(2_000), 2_500).0, PropertyStatus::Violated);
    // A value damaged after the history was sealed cannot turn the violation into a pass.
    let mut damaged = history(FaultKind::ClockJump, "redis-primary", Some(2_000), 3_500);
    for line in &mut damaged {
        if let HistoryLine::Fault(f) = line {
            if f.phase == FaultPhase::Healed {
                f.outlasts_ms = Some(60_000);
            }
        }
    }
    assert_eq!(check(&damaged).verdict, Verdict::Inconclusive);
}

#[test]
fn the_liveness_bound_counts_rounds_as_long_as_this_run_ran_them() {
    // Bound 1000 ms built from a 100 ms round. After the heal, n1 takes a whole round of
    // `round_ms` from its acquire (its node's stamp) to its persist, with no fault in effect.
    let judged = |estimate: Option<u64>, round_ms: u64, persist: bool| {
        let mut h =
            H::new().fault(1, FaultPhase::Requested).fault(1, FaultPhase::Verified).fault(1, FaultPhase::Healed);
        h = h.event("n1", EventKind::Acquired { token: "n1/f1".into(), fence: 1, sent_ns: None }).wait(round_ms);
        if persist {
            h = h.write("n1", 1, StoreOp::PersistRecord, "c1", true);
        }
        let mut h = h.wait(3_000).end();
        if let HistoryLine::Header(hd) = &mut h[0] {
            hd.round_estimate_ms = estimate;
        }
        let r = check(&h);
        let p = r.properties.into_iter().find(|p| p.name == "liveness").unwrap();
        (p.status, p.sentence)
    };
    // Rounds of 1401 ms (the builder steps 1 ms per line) where 100 were estimated: the bound
    // is 1000 + 2 x 1301, and it held.
    let (status, sentence) = judged(Some(100), 1400, true);
    assert_eq!(status, PropertyStatus::Held, "{sentence}");
    assert!(sentence.contains("bound 3602 ms: rounds here took up to 1401 ms"), "{sentence}");
    // Without the estimate (a history before version 4) the bound is the header's.
    assert_eq!(judged(None, 1400, true).0, PropertyStatus::Violated);
    // A round no longer than the estimate leaves the bound alone; no sync at all still fails.
    assert_eq!(judged(Some(2000), 1400, true).0, PropertyStatus::Violated);
    assert_eq!(judged(Some(100), 1400, false).0, PropertyStatus::Violated);
}

#[test]
fn holes_in_the_history_make_the_run_inconclusive_never_a_pass() {
    let base = || H::new().round("n1", 1);
    let unverified = base().fault(1, FaultPhase::Requested).fault(1, FaultPhase::Healed).round("n1", 2).end();
    let mut garbage = base().end();
    garbage.insert(
        1,
        HistoryLine::Garbage { node: "n1".into(), received_ns: 1, raw: "junk".into(), why: "not json".into() },
    );
    let mut no_snapshot = base().end();
    no_snapshot.pop();
    let mut gap = base().end();
    gap.retain(|l| !matches!(l, HistoryLine::Audit(a) if a.seq == 2));
    let silent = base()
        .event("n2", EventKind::AcquireAttempt)
        .wait(20_000)
        .event("n2", EventKind::AcquireAttempt)
        .round("n1", 2)
        .end();
    for (name, h) in [
        ("unverified fault", unverified),
        ("garbage", garbage),
        ("no snapshot", no_snapshot),
        ("audit gap", gap),
        ("silent node", silent),
    ] {
        let r = check(&h);
        assert_eq!(r.verdict, Verdict::Inconclusive, "{name}: {:?}", r.inconclusive);
        assert!(!r.inconclusive.is_empty(), "{name}");
    }
    // A node silent during a fault declared on it is no hole.
    let paused = base()
        .fault(1, FaultPhase::Requested)
        .fault(1, FaultPhase::Verified)
        .event("n1", EventKind::AcquireAttempt)
        .wait(20_000)
        .event("n1", EventKind::AcquireAttempt)
        .fault(1, FaultPhase::Healed)
        .round("n1", 2)
        .end();
    assert_eq!(check(&paused).verdict, Verdict::Pass, "{:?}", check(&paused).inconclusive);
}

#[test]
fn an_instance_the_observer_lost_is_a_hole_unless_a_fault_on_that_instance_was_declared() {
    let on_primary = |mut h: H, phase: FaultPhase| {
        let at = h.tick();
        h.lines.push(HistoryLine::Fault(FaultEvent {
            id: 1,
            fault: FaultKind::Failover,
            target: "redis-primary".into(),
            phase,
            at_ns: at,
            detail: String::new(),
            redis_link: None,
            outlasts_ms: None,
        }));
        h
    };
    // The observer sees nothing of the primary for 15 s (its gap limit is 10 s); the node reports.
    let lost = |fault: bool| {
        let mut h = H::new().round("n1", 1).observe(None);
        if fault {
            h = on_primary(on_primary(h, FaultPhase::Requested), FaultPhase::Verified);
        }
        for _ in 0..3 {
            h = h.wait(5_000).event("n1", EventKind::AcquireAttempt);
        }
        if fault {
            h = on_primary(h, FaultPhase::Healed);
        }
        check(&h.observe(None).round("n1", 2).end())
    };
    let hole = lost(false);
    assert_eq!(hole.verdict, Verdict::Inconclusive, "{:?}", hole.inconclusive);
    assert!(hole.inconclusive.iter().any(|m| m.contains("the observer saw nothing of redis-primary")), "{hole:?}");
    let declared = lost(true);
    assert!(declared.inconclusive.is_empty(), "a gap during a fault on the instance: {:?}", declared.inconclusive);
    assert_eq!(declared.verdict, Verdict::Pass);
}

#[test]
fn an_expected_failure_passes_when_observed_and_fails_when_missing() {
    let stale = H::expecting(Some("no_stale_write"))
        .round("n2", 2)
        .write("n1", 1, StoreOp::PersistRecord, "c1", true)
        .round("n2", 3)
        .end();
    let r = check(&stale);
    assert_eq!((r.verdict, r.expectation), (Verdict::Pass, Some(Expectation::ExpectedFailureObserved)));
    let clean = H::expecting(Some("no_stale_write")).round("n1", 1).end();
    let r = check(&clean);
    assert_eq!((r.verdict, r.expectation), (Verdict::Fail, Some(Expectation::ExpectedFailureMissing)));
    // Another property failing still fails the run.
    let other = H::expecting(Some("no_stale_write"))
        .round("n2", 2)
        .write("n1", 1, StoreOp::PersistRecord, "c1", true)
        .write("n3", 2, StoreOp::Upsert, "c2", true)
        .round("n2", 3)
        .end();
    let r = check(&other);
    assert_eq!(r.verdict, Verdict::Fail);
    // Unless the scenario declares that its hazard violates those too.
    let also: Vec<String> = r
        .properties
        .iter()
        .filter(|p| p.status == PropertyStatus::Violated && p.name != "no_stale_write")
        .map(|p| p.name.clone())
        .collect();
    assert!(!also.is_empty());
    let mut declared = other.clone();
    if let HistoryLine::Header(h) = &mut declared[0] {
        h.expected.as_mut().unwrap().also = also;
    }
    crate::history::seal(&mut declared);
    assert_eq!(check(&declared).verdict, Verdict::Pass);
}

/// n1 loses to n2, then works 200 ms more; `paused` puts a SIGSTOP of n1 in between.
fn wasteful(budget: Option<u64>, paused: bool) -> Vec<HistoryLine> {
    let mut h = H::new();
    if let HistoryLine::Header(header) = &mut h.lines[0] {
        header.waste_budget_ms = budget;
    }
    let mut h = h
        .event("n1", EventKind::Acquired { token: token("n1", 1), fence: 1, sent_ns: None })
        .event("n2", EventKind::Acquired { token: token("n2", 2), fence: 2, sent_ns: None });
    if paused {
        h = h.fault_of(FaultKind::Pause, 1, FaultPhase::Requested);
    }
    h = h.wait(200);
    if paused {
        h = h.fault_of(FaultKind::Pause, 1, FaultPhase::Healed);
    }
    h.event("n1", EventKind::ModelCall { token: token("n1", 1), batch: 1, ms: 20, decided_ns: None })
        .round("n2", 2)
        .end()
}

#[test]
fn working_past_the_waste_budget_after_a_loss_violates_bounded_waste_unless_the_node_was_paused() {
    assert_eq!(status(&wasteful(None, false), "bounded_waste"), PropertyStatus::NotApplicable);
    assert_eq!(status(&wasteful(Some(1_000), false), "bounded_waste"), PropertyStatus::Held);
    let r = check(&wasteful(Some(50), false));
    let p = r.properties.iter().find(|p| p.name == "bounded_waste").unwrap();
    assert_eq!(p.status, PropertyStatus::Violated);
    assert!(p.violations[0].summary.contains("n1 worked 20"), "{}", p.violations[0].summary);
    assert_eq!(r.verdict, Verdict::Fail);
    assert_eq!(status(&wasteful(Some(50), true), "bounded_waste"), PropertyStatus::Held);
}

#[test]
fn a_model_call_left_running_after_a_loss_is_waste_until_the_service_answered_it() {
    // n1's call reached the model service before n2 acquired and was answered 200 ms after: the
    // service worked for a lost lease that long. Its `model_call` report (sent on the answer)
    // made it waste before the service's log was read; the service's log must say the same.
    let model = |arrived_ns, finished_ns| {
        HistoryLine::Model(leasequake_reports::history::ModelRecord {
            seq: 1,
            arrived_ns,
            finished_ns,
            tenant: "t".into(),
            node: "n1".into(),
            token: token("n1", 1),
            fence: 1,
            batch: 1,
            ms: 220,
        })
    };
    let with = |finished_after_ms: Option<u64>| {
        let mut lines = wasteful(Some(50), false);
        let n2_acquired = lines
            .iter()
            .find_map(|l| match l {
                HistoryLine::Node { node, received_ns, event, .. }
                    if node == "n2" && matches!(event.kind, EventKind::Acquired { .. }) =>
                {
                    Some(*received_ns)
                }
                _ => None,
            })
            .unwrap();
        lines.retain(
            |l| !matches!(l, HistoryLine::Node { event, .. } if matches!(event.kind, EventKind::ModelCall { .. })),
        );
        let last = lines.len() - 1;
        lines.insert(last, model(n2_acquired - MS, finished_after_ms.map(|ms| n2_acquired + ms * MS)));
        crate::history::seal(&mut lines);
        lines
    };
    let p = |lines: &[HistoryLine]| check(lines).properties.into_iter().find(|p| p.name == "bounded_waste").unwrap();
    let left_running = p(&with(Some(200)));
    assert_eq!(left_running.status, PropertyStatus::Violated, "{left_running:?}");
    assert!(left_running.violations[0].summary.contains("n1 worked 20"), "{:?}", left_running.violations[0].summary);
    assert_eq!(p(&with(Some(20))).status, PropertyStatus::Held, "answered within the budget");
    assert_eq!(p(&with(None)).status, PropertyStatus::Held, "cancelled at once: never answered");
}

/// n1 acquires (its key seen with 100 ms left), n2 acquires, and n1 works on `work_ms` later;
/// with `failover`, all of it while a failover is in force (the split brain of sim seed 1431 of
/// sparse-checks: n1's key on the cut-off primary, n2's on the promoted replica).
fn split_brain(failover: bool, work_ms: u64) -> Vec<HistoryLine> {
    let mut h = H::new();
    if let HistoryLine::Header(header) = &mut h.lines[0] {
        header.waste_budget_ms = Some(50);
    }
    if failover {
        h = h.fault_of(FaultKind::Failover, 1, FaultPhase::Requested);
    }
    h = h
        .event("n1", EventKind::Acquired { token: token("n1", 1), fence: 1, sent_ns: None })
        .observe(Some(&token("n1", 1)))
        .event("n2", EventKind::Acquired { token: token("n2", 2), fence: 2, sent_ns: None })
        .wait(work_ms)
        .event("n1", EventKind::ModelCall { token: token("n1", 1), batch: 1, ms: 20, decided_ns: None });
    if failover {
        h = h.fault_of(FaultKind::Failover, 1, FaultPhase::Healed);
    }
    h.round("n2", 2).end()
}

#[test]
fn a_successor_a_failover_let_in_counts_the_holders_waste_from_its_keys_expiry_not_before() {
    // Without a failover, 80 ms of work after n2 acquired is past the 50 ms budget.
    assert_eq!(status(&split_brain(false, 80), "bounded_waste"), PropertyStatus::Violated);
    // In a failover's split brain n1 could not know before its key ran out (~100 ms): held.
    assert_eq!(status(&split_brain(true, 80), "bounded_waste"), PropertyStatus::Held);
    // A lease that works on well past its own key's expiry is still judged from there.
    let r = check(&split_brain(true, 300));
    let p = r.properties.iter().find(|p| p.name == "bounded_waste").unwrap();
    assert_eq!(p.status, PropertyStatus::Violated, "{p:?}");
    assert_eq!(r.verdict, Verdict::Fail);
}

/// n3 and n2 report acquisitions 1 ms apart; n3 then works 300 ms.
fn racing_reports(n2_fence: u64) -> Vec<HistoryLine> {
    let mut h = H::new();
    if let HistoryLine::Header(header) = &mut h.lines[0] {
        header.waste_budget_ms = Some(100);
    }
    h.event("n3", EventKind::Acquired { token: token("n3", 3), fence: 3, sent_ns: None })
        .event("n2", EventKind::Acquired { token: token("n2", n2_fence), fence: n2_fence, sent_ns: None })
        .wait(300)
        .event("n3", EventKind::ModelCall { token: token("n3", 3), batch: 0, ms: 300, decided_ns: None })
        .end()
}

#[test]
fn racing_acquisition_reports_are_ordered_by_the_lease_fence() {
    // n2 took the key first (fence 2) but reported last: n3 lost nothing.
    assert_eq!(status(&racing_reports(2), "bounded_waste"), PropertyStatus::Held);
    // n2 really came second (fence 4): n3 worked on after losing.
    assert_eq!(status(&racing_reports(4), "bounded_waste"), PropertyStatus::Violated);
}

#[test]
fn work_after_a_successor_acquired_is_wasted_and_measured() {
    let h = H::new()
        .event("n1", EventKind::Acquired { token: token("n1", 1), fence: 1, sent_ns: None })
        .observe(Some(&token("n1", 1)))
        .event("n2", EventKind::Acquired { token: token("n2", 2), fence: 2, sent_ns: None })
        .event("n1", EventKind::ModelCall { token: token("n1", 1), batch: 1, ms: 20, decided_ns: None })
        .wait(50)
        .event(
            "n1",
            EventKind::StoreCallSent {
                token: token("n1", 1),
                fence: 1,
                op: StoreOp::Upsert,
                call: 3,
                decided_ns: None,
            },
        )
        .event("n1", EventKind::RoundAborted { token: token("n1", 1), lost: true, reason: "held_by_other".into() })
        .round("n2", 2)
        .end();
    let m = check(&h).metrics;
    let n1 = &m.nodes["n1"];
    assert_eq!((n1.wasted_model_calls, n1.wasted_store_calls, n1.lost_rounds), (1, 1, 1));
    assert!(n1.wasted_ms >= 50, "{n1:?}");
}

#[test]
fn lines_that_reach_the_harness_late_are_placed_by_the_nodes_stamps_for_waste() {
    // n1's last calls were made before n2 acquired (by n1's own stamps) but reached the harness
    // 300 ms later, after n2's acquire: a loaded machine, not waste. Made 200 ms after n2's
    // acquire, they are waste, however quickly they arrive.
    let late = |made_after_ms: i64| {
        let mut h = H::new().event("n1", EventKind::Acquired { token: token("n1", 1), fence: 1, sent_ns: None });
        let base = h.tick();
        let acquired_n2 = base + 100 * MS;
        h = h.wait(100).event("n2", EventKind::Acquired { token: token("n2", 2), fence: 2, sent_ns: None });
        let made = acquired_n2.saturating_add_signed(made_after_ms * MS as i64);
        let received = acquired_n2 + 300 * MS;
        h.t = received;
        h.lines.push(HistoryLine::Node {
            node: "n1".into(),
            incarnation: 1,
            received_ns: received,
            event: NodeEvent {
                mono_ns: made,
                round: 1,
                kind: EventKind::StoreCallSent {
                    token: token("n1", 1),
                    fence: 1,
                    op: StoreOp::Upsert,
                    call: 3,
                    decided_ns: None,
                },
            },
        });
        let mut h = h.round("n2", 2).end();
        if let HistoryLine::Header(hd) = &mut h[0] {
            hd.waste_budget_ms = Some(150);
        }
        crate::history::seal(&mut h);
        let r = check(&h);
        (r.metrics.nodes["n1"].wasted_store_calls, status(&h, "bounded_waste"))
    };
    assert_eq!(late(-20), (0, PropertyStatus::Held));
    assert_eq!(late(200), (1, PropertyStatus::Violated));
}

#[test]
fn a_holder_no_node_reported_is_a_successor_only_if_its_key_was_written_after_the_acquire() {
    // n1 acquires; a sample then shows a token no node reported (n1's own earlier, ambiguous
    // acquire, or a node that never said so), with `left` ms of its 1500 ms ttl left; n1 works
    // on for 500 ms. Written 400 ms ago (before n1's acquire): an older key the GET saw just
    // before the acquire took effect, no loss. Written 1 ms ago: a successor, and n1's work waste.
    let waste = |left: i64| {
        let mut h = H::new().event("n1", EventKind::Acquired { token: token("n1", 1), fence: 1, sent_ns: None });
        let at = h.tick() + 100 * MS;
        h.t = at;
        h.lines.push(HistoryLine::Observer(ObserverSample {
            instance: "redis-primary".into(),
            at_ns: at,
            holder: Some("n9/1/7/unreported".into()),
            ttl_ms: Some(left),
            role: Some("master".into()),
            error: None,
            asked_ns: None,
        }));
        let h =
            h.wait(500).event("n1", EventKind::ModelCall { token: token("n1", 1), batch: 1, ms: 20, decided_ns: None });
        let mut h = h.round("n1", 1).end();
        if let HistoryLine::Header(hd) = &mut h[0] {
            hd.ttl_ms = Some(1500);
            hd.waste_budget_ms = Some(150);
        }
        crate::history::seal(&mut h);
        (check(&h).metrics.nodes["n1"].wasted_model_calls, status(&h, "bounded_waste"))
    };
    assert_eq!(waste(1100), (0, PropertyStatus::Held));
    assert_eq!(waste(1499), (1, PropertyStatus::Violated));
}

#[test]
fn a_write_landing_while_another_owned_is_counted_and_an_absent_key_is_not_another_owner() {
    let h = H::new()
        .event("n1", EventKind::Acquired { token: token("n1", 1), fence: 1, sent_ns: None })
        .observe(Some(&token("n1", 1)))
        .write("n1", 1, StoreOp::CreateCollection, "c1", true)
        .observe(None)
        .write("n1", 1, StoreOp::Upsert, "c1", true)
        .observe(Some(&token("n2", 2)))
        .write("n1", 1, StoreOp::Upsert, "c1", true)
        .event("n3", EventKind::Acquired { token: token("n3", 3), fence: 3, sent_ns: None })
        .observe(None)
        .write("n1", 1, StoreOp::Upsert, "c1", true)
        .end();
    assert_eq!(
        check(&h).metrics.landed_while_another_owned,
        2,
        "under n2's key, and after n3's acquire; not under an absent key (a sample is slower than a release)"
    );
}

#[test]
fn faults_report_their_time_to_effect() {
    let h = H::new()
        .fault(7, FaultPhase::Requested)
        .wait(30)
        .fault(7, FaultPhase::Verified)
        .fault(7, FaultPhase::Healed)
        .round("n1", 1)
        .end();
    assert_eq!(check(&h).metrics.fault_effect_ms, [(7, "pause on n1".to_owned(), 31)]);
}

mod against_a_brute_force_reference {
    //! Random audit logs (valid and violating), judged by the checker and by a quadratic
    //! reference written from the property's definition, not from the checker.

    use proptest::prelude::*;

    use super::*;

    #[derive(Debug, Clone)]
    struct W {
        node: u8,
        fence: u64,
        accepted: bool,
    }

    fn history(ws: &[W]) -> Vec<HistoryLine> {
        let mut h = H::new();
        for w in ws {
            h = h.write(&format!("n{}", w.node), w.fence, StoreOp::Upsert, "c", w.accepted);
        }
        h.end()
    }

    /// Writes j such that some earlier accepted write had a higher fence.
    fn stale_reference(ws: &[W]) -> u64 {
        let acc: Vec<&W> = ws.iter().filter(|w| w.accepted).collect();
        (0..acc.len()).filter(|&j| (0..j).any(|i| acc[i].fence > acc[j].fence)).count() as u64
    }

    /// Writes j whose fence was first presented by another owner (token = node + fence here).
    fn anomaly_reference(ws: &[W]) -> u64 {
        let acc: Vec<&W> = ws.iter().filter(|w| w.accepted).collect();
        (0..acc.len())
            .filter(|&j| {
                let first = (0..=j).find(|&i| acc[i].fence == acc[j].fence).unwrap_or(j);
                acc[first].node != acc[j].node
            })
            .count() as u64
    }

    fn writes() -> impl Strategy<Value = Vec<W>> {
        proptest::collection::vec((1u8..4, 1u64..6, proptest::bool::weighted(0.8)), 0..40)
            .prop_map(|v| v.into_iter().map(|(node, fence, accepted)| W { node, fence, accepted }).collect())
    }

    fn count(h: &[HistoryLine], name: &str) -> u64 {
        check(h).properties.iter().find(|p| p.name == name).map_or(0, |p| p.violation_count)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        #[test]
        fn stale_writes_match_the_reference(ws in writes()) {
            prop_assert_eq!(count(&history(&ws), "no_stale_write"), stale_reference(&ws));
        }

        #[test]
        fn fence_anomalies_match_the_reference(ws in writes()) {
            prop_assert_eq!(count(&history(&ws), "fence_anomaly"), anomaly_reference(&ws));
        }

        #[test]
        fn histories_with_rising_fences_pass(mut ws in writes()) {
            // A valid history by construction: one owner per fence, fences never fall.
            ws.sort_by_key(|w| w.fence);
            for w in &mut ws { w.node = (w.fence % 3) as u8 + 1; }
            let r = check(&history(&ws));
            prop_assert_eq!(count(&history(&ws), "no_stale_write") + count(&history(&ws), "fence_anomaly"), 0);
            prop_assert_ne!(r.verdict, Verdict::Fail);
        }
    }
}

/// n1 acquires with a 100 ms renewal interval (recorded, or left to be inferred), renews four
/// times, then `between` happens, and n1 goes on working 280 ms after its last renewal.
fn renewals_then(recorded: bool, between: impl FnOnce(H) -> H) -> Vec<HistoryLine> {
    let t = token("n1", 1);
    let mut h = if recorded { H::renewing_every(100) } else { H::new() };
    h = h.event("n1", EventKind::Acquired { token: t.clone(), fence: 1, sent_ns: None });
    for _ in 0..4 {
        h = h.wait(99).event("n1", EventKind::Renewed { token: t.clone(), sent_ns: None });
        h = h.event("n1", EventKind::CheckpointPassed { token: t.clone(), number: 2, decided_ns: None });
    }
    h = between(h).wait(280);
    h.event("n1", EventKind::CheckpointPassed { token: t.clone(), number: 7, decided_ns: None })
        .event(
            "n1",
            EventKind::StoreCallSent { token: t, fence: 1, op: StoreOp::PersistRecord, call: 1, decided_ns: None },
        )
        .end()
}

#[test]
fn working_on_after_renewals_stop_with_redis_answering_violates_keeps_renewing() {
    // A watchdog that died with its reset connection: the owner works on, unrenewed.
    let reset = |h: H| h.fault_seen(FaultKind::Partition, 1, Some(LinkCut::Reset)).fault(1, FaultPhase::Healed);
    let h = renewals_then(true, reset);
    let r = check(&h);
    let p = r.properties.iter().find(|p| p.name == "keeps_renewing").unwrap();
    assert_eq!((p.status, p.violation_count), (PropertyStatus::Violated, 1), "one report per acquisition: {p:?}");
    assert!(p.sentence.contains("passed checkpoint 7") && p.sentence.contains("renewal every 100 ms"), "{p:?}");
    assert_eq!(r.verdict, Verdict::Fail);
    // The same, with the interval inferred from the renewals (histories that did not record it).
    assert_eq!(status(&renewals_then(false, reset), "keeps_renewing"), PropertyStatus::Violated);
    // Nothing between: renewals simply stopped.
    assert_eq!(status(&renewals_then(true, |h| h), "keeps_renewing"), PropertyStatus::Violated);
}

#[test]
fn a_renewal_redis_may_not_answer_excuses_the_lag_and_a_renewing_holder_holds() {
    for (kind, link) in [
        (FaultKind::Partition, Some(LinkCut::Silent)),
        // A store-only partition (no Redis link cut), or one recorded before version 4 (no
        // finding): excused, the reading that cannot make a FAIL.
        (FaultKind::Partition, None),
        (FaultKind::Pause, None),
        (FaultKind::StallRenewal, None),
        (FaultKind::PauseWrites, None),
        (FaultKind::Failover, None),
    ] {
        let h = renewals_then(true, |h| h.fault_seen(kind, 1, link).wait(50).fault(1, FaultPhase::Healed));
        assert_eq!(status(&h, "keeps_renewing"), PropertyStatus::Held, "{kind} {link:?}");
    }
    // A fault that cannot hold a renewal excuses nothing.
    let h = renewals_then(true, |h| h.fault_seen(FaultKind::SlowModel, 1, None).fault(1, FaultPhase::Healed));
    assert_eq!(status(&h, "keeps_renewing"), PropertyStatus::Violated);
    // Working 250 ms after the last renewal is within 2.5 intervals; 251 is not.
    let within = |ms: u64| {
        let t = token("n1", 1);
        let h = H::renewing_every(100)
            .event("n1", EventKind::Acquired { token: t.clone(), fence: 1, sent_ns: None })
            .wait(ms - 1);
        status(
            &h.event("n1", EventKind::ModelCall { token: t, batch: 0, ms: 50, decided_ns: None }).end(),
            "keeps_renewing",
        )
    };
    assert_eq!(within(250), PropertyStatus::Held);
    assert_eq!(within(251), PropertyStatus::Violated);
}

#[test]
fn keeps_renewing_names_a_reported_loss_instead_of_a_silent_watchdog() {
    let sentence = |h: &[HistoryLine]| {
        check(h).properties.into_iter().find(|p| p.name == "keeps_renewing").map(|p| p.sentence).unwrap_or_default()
    };
    let silent = renewals_then(true, |h| h);
    assert!(sentence(&silent).contains("its renewals had stopped without a loss"), "{}", sentence(&silent));
    let lost = renewals_then(true, |h| {
        h.event(
            "n1",
            EventKind::OwnershipLost { token: token("n1", 1), reason: "renewal_failed".into(), checkpoint: None },
        )
    });
    let s = sentence(&lost);
    assert!(s.contains("it had reported its loss (renewal_failed)") && s.contains("still acted"), "{s}");
}

#[test]
fn a_role_change_no_failover_explains_is_drift_and_inconclusive() {
    let roles = |h: H, primary: &str, replica: &str| h.role("redis-primary", primary).role("redis-replica", replica);
    // Sentinel failed over on its own: the replica became master with no failover declared.
    let drifted = roles(roles(H::new().round("n1", 1), "master", "slave"), "slave", "master").round("n1", 2).end();
    let r = check(&drifted);
    assert_eq!(r.verdict, Verdict::Inconclusive, "{r:?}");
    assert!(
        r.inconclusive.iter().any(|i| i.contains("drifted") && i.contains("redis-replica")),
        "{:?}",
        r.inconclusive
    );
    // Nodes that follow failovers as Sentinel-aware clients make the change part of the run.
    let mut following = drifted.clone();
    if let HistoryLine::Header(h) = &mut following[0] {
        h.clients_follow = true;
    }
    crate::history::seal(&mut following);
    assert_eq!(check(&following).verdict, Verdict::Pass, "{:?}", check(&following).inconclusive);
    // The same change inside a declared failover is the fault doing its work.
    let declared = roles(H::new().round("n1", 1), "master", "slave")
        .fault_of(FaultKind::Failover, 1, FaultPhase::Requested)
        .fault_of(FaultKind::Failover, 1, FaultPhase::Verified);
    let declared =
        roles(declared, "slave", "master").fault_of(FaultKind::Failover, 1, FaultPhase::Healed).round("n1", 2).end();
    let r = check(&declared);
    assert_eq!(r.verdict, Verdict::Pass, "{:?}", r.inconclusive);
    // The old primary demoted at the failover's heal: the last sample that read it master was
    // asked before the heal and answered after it (a slow exec); the demotion is the heal's.
    let h = roles(H::new().round("n1", 1), "master", "slave")
        .fault_of(FaultKind::Failover, 1, FaultPhase::Requested)
        .fault_of(FaultKind::Failover, 1, FaultPhase::Verified)
        .role("redis-replica", "master");
    let mut h = h;
    let asked = h.tick();
    let mut h2 = h.fault_of(FaultKind::Failover, 1, FaultPhase::Healed);
    let answered = h2.tick();
    h2.lines.push(HistoryLine::Observer(ObserverSample {
        instance: "redis-primary".into(),
        at_ns: answered,
        holder: None,
        ttl_ms: None,
        role: Some("master".into()),
        error: None,
        asked_ns: Some(asked),
    }));
    let late = h2.role("redis-primary", "slave").round("n1", 2).end();
    let r = check(&late);
    assert_eq!(r.verdict, Verdict::Pass, "{:?}", r.inconclusive);
    // An unreadable sample (no role) is no change.
    let mut blind = roles(H::new().round("n1", 1), "master", "slave");
    let at = blind.tick();
    blind.lines.push(HistoryLine::Observer(ObserverSample {
        instance: "redis-primary".into(),
        at_ns: at,
        holder: None,
        ttl_ms: None,
        role: None,
        error: Some("exec failed".into()),
        asked_ns: None,
    }));
    let blind = roles(blind, "master", "slave").round("n1", 2).end();
    assert_eq!(check(&blind).verdict, Verdict::Pass, "{:?}", check(&blind).inconclusive);
}

#[test]
fn an_environment_change_no_fault_explains_is_drift_naming_it() {
    let judged = |h: H| check(&h.round("n1", 2).end());
    let named = |h: H, subject: &str| {
        let r = judged(h);
        assert_eq!(r.verdict, Verdict::Inconclusive, "{r:?}");
        assert!(r.inconclusive.iter().any(|i| i.contains("drifted") && i.contains(subject)), "{:?}", r.inconclusive);
    };
    named(H::new().round("n1", 1).env(EnvChange::ContainerDied, "sentinel-3"), "sentinel-3");
    named(H::new().round("n1", 1).env(EnvChange::ContainerStarted, "store"), "store");
    named(H::new().round("n1", 1).env(EnvChange::ContainerOther, "redis-replica"), "redis-replica");
    named(H::new().round("n1", 1).env(EnvChange::ProxyChanged, "n1-redis"), "n1-redis");
    named(H::new().round("n1", 1).env(EnvChange::ProxyUnreachable, "proxy"), "proxy");
    // The host's wall clock set: Redis expires keys on it, the leases count on the monotonic one.
    named(H::new().round("n1", 1).env(EnvChange::ClockStepped, "host"), "host");
    // redis-primary restarting with no redis_restart in effect (before it, after it, or another
    // fault in effect) is drift too.
    named(H::new().round("n1", 1).env(EnvChange::ContainerDied, "redis-primary"), "redis-primary");
    let after = H::new()
        .fault_of(FaultKind::RedisRestart, 1, FaultPhase::Requested)
        .fault_of(FaultKind::RedisRestart, 1, FaultPhase::Verified)
        .fault_of(FaultKind::RedisRestart, 1, FaultPhase::Healed);
    named(after.env(EnvChange::ContainerDied, "redis-primary"), "redis-primary");
    let other = H::new().fault_of(FaultKind::Pause, 1, FaultPhase::Requested);
    named(
        other.env(EnvChange::ContainerDied, "redis-primary").fault_of(FaultKind::Pause, 1, FaultPhase::Healed),
        "redis",
    );
    // Following failovers does not excuse a container or a proxy.
    let mut following = H::new().round("n1", 1).env(EnvChange::ContainerDied, "sentinel-1").round("n1", 2).end();
    if let HistoryLine::Header(h) = &mut following[0] {
        h.clients_follow = true;
    }
    crate::history::seal(&mut following);
    assert_eq!(check(&following).verdict, Verdict::Inconclusive, "{:?}", check(&following).inconclusive);
}

#[test]
fn environment_changes_a_fault_explains_or_that_only_inform_leave_the_verdict_alone() {
    // redis-primary killed and started again inside a declared redis_restart.
    let restart = H::new()
        .round("n1", 1)
        .fault_of(FaultKind::RedisRestart, 1, FaultPhase::Requested)
        .env(EnvChange::ContainerDied, "redis-primary")
        .env(EnvChange::ContainerStarted, "redis-primary")
        .fault_of(FaultKind::RedisRestart, 1, FaultPhase::Verified)
        .fault_of(FaultKind::RedisRestart, 1, FaultPhase::Healed)
        .round("n1", 2)
        .end();
    assert_eq!(check(&restart).verdict, Verdict::Pass, "{:?}", check(&restart).inconclusive);
    // A Sentinel's announcements are shown, not judged: the observer's roles judge a failover.
    let told = H::new()
        .round("n1", 1)
        .env(EnvChange::Sentinel, "redis-primary")
        .env(EnvChange::SwitchMaster, "redis-replica")
        .round("n1", 2)
        .end();
    assert_eq!(check(&told).verdict, Verdict::Pass, "{:?}", check(&told).inconclusive);
}

/// A `hello` of protocol 3 declaring `key` and `renewals`.
fn hello(key: Option<&str>, renewals: Option<leasequake_reports::history::Renewals>) -> EventKind {
    EventKind::Hello { protocol: 3, implementation: "lib".into(), lease_key: key.map(str::to_owned), renewals }
}

/// `node` says `hello`, acquires (sent at the acquire), reports no renewal and decides 500 ms later:
/// past a ttl of 300 ms and 2.5 renewal intervals of 100 ms.
fn works_unrenewed(h: H, node: &str, hello: EventKind, fence: u64) -> H {
    let t = token(node, fence);
    let mut h = h.event(node, hello);
    let sent = h.t + MS;
    h = h.event(node, EventKind::Acquired { token: t.clone(), fence, sent_ns: Some(sent) }).wait(500);
    let decided = h.t + MS;
    h.event(node, EventKind::CheckpointPassed { token: t, number: 3, decided_ns: Some(decided) })
}

#[test]
fn a_node_that_cannot_see_its_renewals_is_not_judged_on_them_one_that_can_is() {
    use leasequake_reports::history::Renewals;
    let timed = || {
        let mut h = H::renewing_every(100);
        if let HistoryLine::Header(hd) = &mut h.lines[0] {
            hd.ttl_ms = Some(300);
        }
        h
    };
    let reported = works_unrenewed(timed(), "n1", hello(None, Some(Renewals::Reported)), 1).end();
    assert_eq!(status(&reported, "keeps_renewing"), PropertyStatus::Violated);
    assert_eq!(status(&reported, "within_validity"), PropertyStatus::Violated);
    let hidden = works_unrenewed(timed(), "n1", hello(Some("lock:t"), Some(Renewals::Hidden)), 1).end();
    let r = check(&hidden);
    for name in ["keeps_renewing", "within_validity"] {
        let p = r.properties.iter().find(|p| p.name == name).unwrap();
        assert_eq!(p.status, PropertyStatus::NotApplicable, "{p:?}");
        assert!(p.sentence.contains("n1 declared") && p.sentence.contains("renewals: hidden"), "{}", p.sentence);
    }
    // Beside a node that reports its renewals: that one is still judged, and caught.
    let both = works_unrenewed(timed(), "n1", hello(Some("lock:t"), Some(Renewals::Hidden)), 1);
    let both = works_unrenewed(both, "n2", hello(Some("lock:t"), None), 2).end();
    let p = check(&both).properties.into_iter().find(|p| p.name == "keeps_renewing").unwrap();
    assert_eq!(p.status, PropertyStatus::Violated, "{p:?}");
    assert!(p.sentence.contains("n2 ") && p.sentence.contains("n1 declared"), "{}", p.sentence);
}

#[test]
fn nodes_that_declare_different_lease_keys_make_the_run_inconclusive() {
    let h = H::new().event("n1", hello(Some("lock:t"), None)).event("n2", hello(None, None)).round("n1", 1).end();
    let r = check(&h);
    assert_eq!(r.verdict, Verdict::Inconclusive, "{:?}", r.inconclusive);
    assert!(
        r.inconclusive.iter().any(|i| i.contains("n1: lock:t") && i.contains("n2: the protocol's")),
        "{:?}",
        r.inconclusive
    );
    let same = H::new().event("n1", hello(Some("lock:t"), None)).event("n2", hello(Some("lock:t"), None));
    assert_eq!(check(&same.round("n1", 1).end()).verdict, Verdict::Pass);
}

#[test]
fn a_lease_the_observer_never_saw_while_nodes_held_it_is_inconclusive_not_a_pass() {
    // n1 holds its acquisition for `held_ms`; ten observer samples see `holder` in the key.
    let run = |held_ms: u64, holder: Option<&str>| {
        let t = token("n1", 1);
        let mut h =
            H::new().event("n1", EventKind::Acquired { token: t.clone(), fence: 1, sent_ns: None }).round("n1", 1);
        for _ in 0..10 {
            h = h.wait(held_ms / 10).observe(holder);
        }
        check(&h.event("n1", EventKind::Released { token: t, outcome: "deleted".into() }).end())
    };
    let unseen = run(3000, None);
    let violated: Vec<_> = unseen.properties.iter().filter(|p| p.status == PropertyStatus::Violated).collect();
    assert_eq!(unseen.verdict, Verdict::Inconclusive, "{:?} {violated:?}", unseen.inconclusive);
    assert!(
        unseen.inconclusive.iter().any(|i| i.contains("none of 10 observer samples saw a holder")),
        "{:?}",
        unseen.inconclusive
    );
    assert_eq!(run(3000, Some("n1/f1")).verdict, Verdict::Pass, "the key seen: nothing to say");
    assert_eq!(run(1000, None).verdict, Verdict::Pass, "held too briefly for the samples to say anything");
}
