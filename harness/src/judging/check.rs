//! The checker: turns a history (docs/history.md) into verdicts. Reads only the history; judges
//! named properties, measures what is measured, and says "inconclusive" when the history has a
//! hole. Ordering claims come from the store's arrival sequence only, never from timestamps;
//! times are used for metrics, liveness, and for naming the faults in effect at a violation.
//! Linear in the history's length (a few hash maps, one sort of acquisitions).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use acquisition::Ends;
use leasequake_reports::history::{
    AuditRecord, EnvEvent, EventKind, FaultEvent, FaultKind, FaultPhase, Header, HistoryLine, Holds, LinkCut,
    ModelRecord, ObserverSample, Snapshot, StoreOp, HISTORY_VERSION, HISTORY_VERSION_MIN,
};
use leasequake_reports::wire::WireRecord;
use leasequake_reports::{
    bounded, printable, CheckResult, Evidence, Expectation, PropertyResult, PropertyStatus, Verdict, Violation,
    MAX_VIOLATIONS_KEPT,
};

/// The properties, in report order.
pub const PROPERTIES: [&str; 14] = [
    "no_stale_write",
    "fence_anomaly",
    "sticky_loss",
    "acquisitions_end",
    "within_validity",
    "keeps_renewing",
    "wire_within_validity",
    "wire_keeps_renewing",
    "wire_after_end",
    "testimony",
    "single_writer",
    "cleanup",
    "liveness",
    "bounded_waste",
];

#[derive(Clone, Copy)]
struct NodeLine<'a> {
    node: &'a str,
    /// The node process's incarnation (bumped by every restart).
    incarnation: u64,
    /// The harness's receipt stamp.
    at_ns: u64,
    /// The node's own stamp (its CLOCK_MONOTONIC, the host's), else the receipt stamp.
    sent_ns: u64,
    kind: &'a EventKind,
}

/// A property being judged: keeps the first violations, counts the rest.
struct Judge {
    name: &'static str,
    kept: Vec<Violation>,
    count: u64,
}

impl Judge {
    fn new(name: &'static str) -> Self {
        Self { name, kept: Vec::new(), count: 0 }
    }
    fn violate(&mut self, v: impl FnOnce() -> Violation) {
        self.count += 1;
        if self.kept.len() < MAX_VIOLATIONS_KEPT {
            self.kept.push(v());
        }
    }
    fn result(self, held: &str, na: Option<&str>) -> PropertyResult {
        let (status, sentence) = match (self.count, na) {
            (0, Some(why)) => (PropertyStatus::NotApplicable, why.to_owned()),
            (0, None) => (PropertyStatus::Held, held.to_owned()),
            (n, _) => (PropertyStatus::Violated, format!("{n} violation(s): {}", self.kept[0].summary)),
        };
        PropertyResult { name: self.name.into(), status, sentence, violations: self.kept, violation_count: self.count }
    }
}

fn evidence(label: &str, r: &AuditRecord) -> Evidence {
    Evidence {
        label: label.into(),
        seq: Some(r.seq),
        node: r.node.clone(),
        token: r.token.clone(),
        fence: r.fence,
        what: r.op.to_string(),
        at_ns: r.mono_ns,
    }
}

/// Fault windows, for naming what was in effect at a moment.
struct Faults<'a> {
    windows: Vec<(u64, u64, &'a FaultEvent)>,
}

impl<'a> Faults<'a> {
    fn new(events: &[&'a FaultEvent], end_ns: u64) -> Self {
        let mut open: BTreeMap<u64, (u64, &FaultEvent)> = BTreeMap::new();
        let mut windows = Vec::new();
        for f in events {
            match f.phase {
                FaultPhase::Requested => {
                    open.insert(f.id, (f.at_ns, f));
                }
                FaultPhase::Healed | FaultPhase::Failed => {
                    if let Some((from, first)) = open.remove(&f.id) {
                        windows.push((from, f.at_ns, first));
                    }
                }
                // Not healed: it may have stayed in effect to the end; its window stays open.
                FaultPhase::Verified | FaultPhase::HealFailed => {}
            }
        }
        windows.extend(open.into_values().map(|(from, f)| (from, end_ns, f)));
        Self { windows }
    }
    fn active_at(&self, at_ns: u64) -> Vec<String> {
        self.windows
            .iter()
            .filter(|(from, to, _)| *from <= at_ns && at_ns <= *to)
            .map(|(_, _, f)| format!("#{} {} on {}", f.id, f.fault, f.target))
            .collect()
    }
    fn covers(&self, target: &str, from_ns: u64, to_ns: u64) -> bool {
        self.windows.iter().any(|(a, b, f)| f.target == target && *a <= to_ns && from_ns <= *b)
    }
    /// Whether a fault of which `kind` answers yes was in effect at some moment of the span.
    fn covers_any(&self, kind: impl Fn(FaultKind) -> bool, from_ns: u64, to_ns: u64) -> bool {
        self.windows.iter().any(|(a, b, f)| kind(f.fault) && *a <= to_ns && from_ns <= *b)
    }
    fn covers_kind(&self, kind: FaultKind, target: &str, from_ns: u64, to_ns: u64) -> bool {
        self.windows.iter().any(|(a, b, f)| f.fault == kind && f.target == target && *a <= to_ns && from_ns <= *b)
    }
}

/// Judges a history.
#[must_use]
pub fn check(history: &[HistoryLine]) -> CheckResult {
    check_read(history, None)
}

/// Judges a history read from a file, given the hash of its lines but the last as they were read
/// (`history::read_hashed`): the seal is checked against the file's own bytes, and no line is
/// written again to hash it. With `None` the lines are written again (a history in memory).
#[must_use]
pub fn check_read(history: &[HistoryLine], before_last: Option<sha2::Sha256>) -> CheckResult {
    judge(history, before_last.map_or(integrity::Digest::Recompute, integrity::Digest::Read))
}

/// Judges a history this process sealed a moment ago and never let go of (the simulation's): its
/// digest is not written out again to be checked (its counts and last audit seq are).
#[must_use]
pub fn check_sealed_here(history: &[HistoryLine]) -> CheckResult {
    judge(history, integrity::Digest::SealedHere)
}

fn judge(history: &[HistoryLine], digest: integrity::Digest) -> CheckResult {
    let mut inconclusive = Vec::new();
    let Lines { header, snapshot, audit, nodes, faults, observer, environment, wire, model, garbled } =
        Lines::sort(history, &mut inconclusive);
    match header {
        None => inconclusive.push("the history has no header line".into()),
        Some(h) if !(HISTORY_VERSION_MIN..=HISTORY_VERSION).contains(&h.version) => inconclusive.push(format!(
            "history version {} is not one this checker reads ({HISTORY_VERSION_MIN} to {HISTORY_VERSION})",
            h.version
        )),
        Some(_) => {}
    }
    match snapshot {
        None => inconclusive.push("the history has no closing snapshot: the run did not finish recording".into()),
        Some(s) => inconclusive.extend(s.stopped.as_deref().map(printable)),
    }
    // Whole or not: a damaged history is judged for the reader, never reordered or repaired.
    let whole = integrity::integrity(history, digest);
    let damaged = !whole.problems.is_empty();
    inconclusive.extend(whole.problems.iter().map(|p| format!("the history is damaged: {p}")));
    let started = header.map_or(0, |h| h.started_ns);
    let end_ns = snapshot.map(|s| s.ended_ns).or_else(|| nodes.iter().map(|n| n.at_ns).max()).unwrap_or(started);
    let windows = Faults::new(&faults, end_ns);
    fault_holes(&faults, snapshot, &mut inconclusive);
    // An environment that drifted tests another scenario: like damage, no verdict stands on it.
    let follow = header.is_some_and(|h| h.clients_follow);
    let drifted = drift::roles(&observer, &windows, started, follow, &mut inconclusive)
        | drift::environment(&environment, &windows, started, &mut inconclusive);
    if let Some(h) = header {
        silence_holes(h, &nodes, &observer, &windows, end_ns, &mut inconclusive);
    }
    let declared = declared::Declared::read(&nodes);
    inconclusive.extend(declared.key_conflict());
    inconclusive.extend(declared::unseen_key(&nodes, &observer));
    let renewing = declared.renewing(&nodes);

    let mut properties = vec![];
    let (stale, anomaly) = fencing(&audit, &windows);
    properties.push(stale);
    properties.push(anomaly);
    // How each acquisition ended, by its node's own report: read by three properties.
    let ends = acquisition::ends(&nodes);
    properties.push(acquisition::sticky_loss(&nodes, &ends, &windows));
    properties.push(acquisition::acquisitions_end(&nodes, &ends, &windows));
    let validity = acquisition::within_validity(header.and_then(|h| h.ttl_ms), &renewing, &windows);
    properties.push(declared.renewal_property(validity));
    let renewed = keeps_renewing(header.and_then(|h| h.renew_ms), &renewing, &ends, &faults, &windows);
    properties.push(declared.renewal_property(renewed));
    let on_wire = wire::read(header, snapshot, &nodes, &wire);
    let schedule = wire::Schedule::new(&on_wire, header.and_then(|h| h.renew_ms), &declared.hidden);
    for p in [
        wire::within_validity(&on_wire, &windows),
        wire::keeps_renewing(&on_wire, &schedule, &faults, &windows),
        wire::after_end(&on_wire, &schedule, &windows),
        wire::testimony(&on_wire, (&nodes, &garbled), &windows),
    ] {
        if p.status == PropertyStatus::Inconclusive {
            inconclusive.push(format!("{}: {}", p.name, p.sentence));
        }
        properties.push(p);
    }
    properties.push(single_writer(&audit, &windows));
    properties.push(cleanup(&audit));
    let live = liveness(header, (&nodes, &audit), (&faults, &windows), end_ns);
    if live.status == PropertyStatus::Inconclusive {
        inconclusive.push(live.sentence.clone());
    }
    properties.push(live);
    let (metrics, wastes) =
        measure::measure((&audit, &model), &nodes, &faults, &observer, header.and_then(|h| h.ttl_ms));
    properties.push(bounded_waste(header.and_then(|h| h.waste_budget_ms), &wastes, &windows));

    let expected = header.and_then(|h| h.expected.as_ref());
    let (verdict, expectation) = verdict(&properties, expected, damaged || drifted, inconclusive.is_empty());
    CheckResult { verdict, expectation, properties, inconclusive: bounded(inconclusive), notes: whole.notes, metrics }
}

/// A history's lines, sorted by kind (each kind in the order written).
struct Lines<'a> {
    header: Option<&'a Header>,
    snapshot: Option<&'a Snapshot>,
    audit: Vec<&'a AuditRecord>,
    nodes: Vec<NodeLine<'a>>,
    faults: Vec<&'a FaultEvent>,
    observer: Vec<&'a ObserverSample>,
    environment: Vec<&'a EnvEvent>,
    wire: Vec<&'a WireRecord>,
    model: Vec<&'a ModelRecord>,
    /// The nodes that sent a line the harness refused: what they reported is not all here.
    garbled: BTreeSet<&'a str>,
}

impl<'a> Lines<'a> {
    /// Sorts the lines; a garbage line is a reason the run is inconclusive.
    fn sort(history: &'a [HistoryLine], inconclusive: &mut Vec<String>) -> Self {
        let mut l = Self {
            header: None,
            snapshot: None,
            audit: vec![],
            nodes: vec![],
            faults: vec![],
            observer: vec![],
            environment: vec![],
            wire: vec![],
            model: vec![],
            garbled: BTreeSet::new(),
        };
        for line in history {
            match line {
                HistoryLine::Header(h) => l.header = Some(h),
                HistoryLine::Snapshot(s) => l.snapshot = Some(s),
                HistoryLine::Audit(a) => l.audit.push(a),
                HistoryLine::Node { node, incarnation, received_ns, event } => l.nodes.push(NodeLine {
                    node,
                    incarnation: *incarnation,
                    at_ns: *received_ns,
                    sent_ns: if event.mono_ns == 0 { *received_ns } else { event.mono_ns },
                    kind: &event.kind,
                }),
                HistoryLine::Garbage { node, raw, why, .. } => {
                    l.garbled.insert(node);
                    inconclusive.push(format!(
                        "node {} sent a line that is not a protocol event ({}): {}",
                        printable(node),
                        printable(why),
                        printable(raw)
                    ));
                }
                HistoryLine::Fault(f) => l.faults.push(f),
                HistoryLine::Observer(o) => l.observer.push(o),
                HistoryLine::Environment(e) => l.environment.push(e),
                HistoryLine::Wire(w) => l.wire.push(w),
                HistoryLine::Model(m) => l.model.push(m),
            }
        }
        l
    }
}

/// The verdict from the properties: a declared expected failure must be seen (and nothing else
/// violated); `unsound` (a damaged history, a drifted environment) makes it inconclusive, since
/// damage can move a verdict either way; `sound` says nothing else made the run inconclusive.
fn verdict(
    properties: &[PropertyResult],
    expected: Option<&leasequake_reports::history::ExpectedFailure>,
    unsound: bool,
    sound: bool,
) -> (Verdict, Option<Expectation>) {
    let violated: Vec<&str> =
        properties.iter().filter(|p| p.status == PropertyStatus::Violated).map(|p| p.name.as_str()).collect();
    match expected {
        _ if unsound => (Verdict::Inconclusive, None),
        Some(exp) => {
            let seen = violated.contains(&exp.property.as_str());
            let others = violated.iter().any(|p| *p != exp.property && !exp.also.iter().any(|a| a == p));
            let expectation =
                if seen { Expectation::ExpectedFailureObserved } else { Expectation::ExpectedFailureMissing };
            let verdict = match (others, seen, sound) {
                (true, _, _) => Verdict::Fail,
                (false, true, _) => Verdict::Pass,
                (false, false, true) => Verdict::Fail,
                (false, false, false) => Verdict::Inconclusive,
            };
            (verdict, Some(expectation))
        }
        None if !violated.is_empty() => (Verdict::Fail, None),
        None if !sound => (Verdict::Inconclusive, None),
        None => (Verdict::Pass, None),
    }
}

/// No stale write (in arrival order, once a write under a higher fence landed, no write under a
/// lower fence lands) and fence anomalies (two owners presenting the same fence).
fn fencing(audit: &[&AuditRecord], faults: &Faults) -> (PropertyResult, PropertyResult) {
    let mut stale = Judge::new("no_stale_write");
    let mut anomaly = Judge::new("fence_anomaly");
    let mut newest: Option<&AuditRecord> = None;
    let mut by_fence: HashMap<u64, &AuditRecord> = HashMap::new();
    let mut writes = 0;
    for r in audit.iter().copied().filter(|r| r.accepted && r.op.is_write()) {
        writes += 1;
        if let Some(n) = newest.filter(|n| r.fence < n.fence) {
            stale.violate(|| Violation {
                summary: format!(
                    "{} wrote {} under fence {} (seq {}) after {} had written under fence {} (seq {})",
                    r.node, r.op, r.fence, r.seq, n.node, n.fence, n.seq
                ),
                evidence: vec![evidence("newer write", n), evidence("stale write", r)],
                faults_active: faults.active_at(r.mono_ns),
                at_ns: r.mono_ns,
            });
        }
        if newest.is_none_or(|n| r.fence > n.fence) {
            newest = Some(r);
        }
        match by_fence.get(&r.fence) {
            Some(first) if first.token != r.token => anomaly.violate(|| Violation {
                summary: format!(
                    "{} and {} both wrote under fence {} (seq {} and {})",
                    first.node, r.node, r.fence, first.seq, r.seq
                ),
                evidence: vec![evidence("first owner of the fence", first), evidence("second owner of the fence", r)],
                faults_active: faults.active_at(r.mono_ns),
                at_ns: r.mono_ns,
            }),
            Some(_) => {}
            None => {
                by_fence.insert(r.fence, r);
            }
        }
    }
    let na = (writes == 0).then_some("no write landed in the store");
    (
        stale.result("in arrival order, no write under an older fence landed after a newer one", na),
        anomaly.result("no two owners wrote under the same fence", na),
    )
}

/// How far behind its renewals a holder may act, in renewal intervals: a correct lease acts at
/// most one interval after its last renewal plus the time an in-flight renewal takes to answer,
/// and stops at ttl (three intervals) at the latest; the half interval left is the window in which
/// a watchdog that died quietly shows.
const RENEWAL_LAG_HALVES: u64 = 5;

/// Whether a fault in effect on `node` between `from` and `to` could hold its renewal in flight.
/// Partitions whose verification found the Redis link reset (`reset_only`) hold none: a renewal
/// then fails at once. (Before version 4 the finding was only prose: every partition counts as
/// holding its target's renewal, the reading that cannot make a FAIL.)
fn holds_renewal(reset_only: &HashSet<u64>, faults: &Faults, node: &str, from: u64, to: u64) -> bool {
    faults.windows.iter().any(|(a, b, f)| {
        let holds = match f.fault.holds_renewal() {
            Holds::Target => f.target == node && !reset_only.contains(&f.id),
            Holds::Everyone => true,
            Holds::Nobody => false,
        };
        holds && *a <= to && from <= *b
    })
}

/// The evidence of work without renewals: the last renewal (`at.0`) and the act (`at.1`).
fn unrenewed_work(node: &str, token: &str, at: (u64, u64), what: String) -> Vec<Evidence> {
    let ev = |label: &str, what: String, at_ns| Evidence {
        label: label.into(),
        seq: None,
        node: node.into(),
        token: token.to_owned(),
        fence: 0,
        what,
        at_ns,
    };
    vec![ev("last renewal", "renewed or acquired".into(), at.0), ev("work without renewals", what, at.1)]
}

/// A holder keeps renewing while it works. Every action under an acquisition (a checkpoint
/// passed, a model call finished, a store call sent) lands within 2.5 renewal intervals of that
/// acquisition's last renewal (or the acquisition), by the node's own clock, unless Redis may not
/// have answered a renewal in between: a fault on the node that can hold a renewal in flight
/// (a pause, a stalled renewal, a partition that does not just reset the Redis link) or on Redis
/// (failover, restart, paused writes), in effect at any time since that renewal. A renewal that
/// fails fast (a reset connection, a key gone) must end ownership at once (sticky loss); a lease
/// that keeps working past it has a watchdog that died without marking the loss.
fn keeps_renewing(
    recorded_renew_ms: Option<u64>,
    nodes: &[NodeLine],
    // How each acquisition ended: an act after the node's own report of the end is explained by it.
    ends: &Ends,
    fault_events: &[&FaultEvent],
    faults: &Faults,
) -> PropertyResult {
    let mut judge = Judge::new("keeps_renewing");
    let renew_ms = recorded_renew_ms.filter(|ms| *ms > 0).or_else(|| inferred_renew_ms(nodes));
    let Some(renew_ms) = renew_ms else {
        return judge.result("", Some("no renewal interval recorded and too few renewals to infer one"));
    };
    let lag_ns = renew_ms.saturating_mul(1_000_000).saturating_mul(RENEWAL_LAG_HALVES) / 2;
    let reset_only: HashSet<u64> = fault_events
        .iter()
        .filter(|f| f.phase == FaultPhase::Verified && f.redis_link == Some(LinkCut::Reset))
        .map(|f| f.id)
        .collect();
    let excused = |node: &str, from: u64, to: u64| holds_renewal(&reset_only, faults, node, from, to);
    // (node, token) -> (last renewal or acquisition, already reported)
    let mut last: HashMap<(&str, &str), (u64, bool)> = HashMap::new();
    let mut judged = 0u64;
    for n in nodes {
        let (token, what) = match n.kind {
            EventKind::Acquired { token, .. } | EventKind::Renewed { token, .. } => {
                last.insert((n.node, token.as_str()), (n.sent_ns, false));
                continue;
            }
            EventKind::CheckpointPassed { token, number, .. } => (token, format!("passed checkpoint {number}")),
            EventKind::ModelCall { token, batch, .. } => (token, format!("finished model call {batch}")),
            EventKind::StoreCallSent { token, op, call, .. } => (token, format!("sent store call {call} ({op:?})")),
            _ => continue,
        };
        let Some((renewed, reported)) = last.get_mut(&(n.node, token.as_str())) else { continue };
        judged += 1;
        let behind = n.sent_ns.saturating_sub(*renewed);
        if behind <= lag_ns || *reported || excused(n.node, *renewed, n.sent_ns) {
            continue;
        }
        *reported = true;
        let at = *renewed;
        let why = match ends.get(&(n.node, token.as_str())).filter(|e| e.at_ns <= n.sent_ns) {
            Some(end) => format!(
                "it had {} {} ms before and still acted",
                end.what,
                n.sent_ns.saturating_sub(end.at_ns) / 1_000_000
            ),
            None => "its renewals had stopped without a loss".to_owned(),
        };
        judge.violate(|| Violation {
            summary: format!(
                "{} {what} under token {token} {} ms after its last renewal (renewal every {renew_ms} ms, at most {} ms behind) with Redis answering: {why}",
                n.node,
                behind / 1_000_000,
                lag_ns / 1_000_000
            ),
            evidence: unrenewed_work(n.node, token, (at, n.sent_ns), what),
            faults_active: faults.active_at(n.sent_ns),
            at_ns: n.sent_ns,
        });
    }
    let na = (judged == 0).then_some("no node acted under an acquisition");
    judge.result(
        &format!(
            "every holder acted within {} ms of its last renewal, or while Redis might not answer",
            lag_ns / 1_000_000
        ),
        na,
    )
}

/// The renewal interval of a history that does not record it: the median gap between one
/// acquisition's successive renewals, the acquisition counting as the first (None under three).
fn inferred_renew_ms(nodes: &[NodeLine]) -> Option<u64> {
    let mut prev: HashMap<(&str, &str), u64> = HashMap::new();
    let mut gaps = Vec::new();
    for n in nodes {
        match n.kind {
            EventKind::Acquired { token, .. } => {
                prev.insert((n.node, token.as_str()), n.sent_ns);
            }
            EventKind::Renewed { token, .. } => {
                if let Some(p) = prev.insert((n.node, token.as_str()), n.sent_ns) {
                    gaps.push(n.sent_ns.saturating_sub(p));
                }
            }
            _ => {}
        }
    }
    if gaps.len() < 3 {
        return None;
    }
    gaps.sort_unstable();
    Some(gaps[gaps.len() / 2] / 1_000_000)
}

/// The live alias only ever points at a collection built under one owner, and alias versions
/// only go up.
fn single_writer(audit: &[&AuditRecord], faults: &Faults) -> PropertyResult {
    let mut judge = Judge::new("single_writer");
    let mut builder: HashMap<&str, &AuditRecord> = HashMap::new();
    let mut last_switch: Option<&AuditRecord> = None;
    let mut switches = 0;
    for r in audit.iter().copied().filter(|r| r.accepted) {
        let Some(c) = r.collection.as_deref() else { continue };
        match r.op {
            StoreOp::CreateCollection => {
                builder.insert(c, r);
            }
            StoreOp::Upsert | StoreOp::SwitchAlias => {
                if let Some(b) = builder.get(c).filter(|b| b.token != r.token) {
                    judge.violate(|| Violation {
                        summary: format!(
                            "collection {c}, built by {} (fence {}), got {} from {} (fence {})",
                            b.node, b.fence, r.op, r.node, r.fence
                        ),
                        evidence: vec![evidence("builder", b), evidence("second writer", r)],
                        faults_active: faults.active_at(r.mono_ns),
                        at_ns: r.mono_ns,
                    });
                }
                if r.op == StoreOp::SwitchAlias {
                    switches += 1;
                    if let Some(prev) = last_switch {
                        let (pv, v) = (prev.alias_version.unwrap_or(0), r.alias_version.unwrap_or(0));
                        let same = prev.collection == r.collection;
                        if v < pv || (v == pv && !same) {
                            judge.violate(|| Violation {
                                summary: format!("alias version went from {pv} to {v}"),
                                evidence: vec![evidence("earlier switch", prev), evidence("later switch", r)],
                                faults_active: faults.active_at(r.mono_ns),
                                at_ns: r.mono_ns,
                            });
                        }
                    }
                    last_switch = Some(r);
                }
            }
            _ => {}
        }
    }
    let na = (switches == 0).then_some("the alias was never switched");
    judge.result("every live collection was built by one owner, and alias versions only rose", na)
}

/// Every temporary collection that a later completed round should have dropped was dropped. (A
/// fault the harness left applied is the harness's failure: inconclusive, see `fault_holes`.)
fn cleanup(audit: &[&AuditRecord]) -> PropertyResult {
    let mut judge = Judge::new("cleanup");
    let mut created: Vec<&AuditRecord> = Vec::new();
    let mut live: HashSet<&str> = HashSet::new();
    let mut dropped: HashSet<&str> = HashSet::new();
    let mut create_seq: HashMap<&str, u64> = HashMap::new();
    for r in audit.iter().copied().filter(|r| r.accepted) {
        let Some(c) = r.collection.as_deref() else { continue };
        match r.op {
            StoreOp::CreateCollection => {
                created.push(r);
                create_seq.insert(c, r.seq);
            }
            StoreOp::SwitchAlias => {
                live.insert(c);
            }
            StoreOp::DropCollection => {
                dropped.insert(c);
            }
            _ => {}
        }
    }
    // A round that created a collection which went live dropped every leftover first.
    let last_live_create = live.iter().filter_map(|c| create_seq.get(c)).max().copied().unwrap_or(0);
    for r in created {
        let c = r.collection.as_deref().unwrap_or("");
        if !live.contains(c) && !dropped.contains(c) && r.seq < last_live_create {
            judge.violate(|| Violation {
                summary: format!(
                    "temporary collection {c} (from {}, fence {}) was left behind although a later round completed",
                    r.node, r.fence
                ),
                evidence: vec![evidence("created, never dropped", r)],
                faults_active: vec![],
                at_ns: r.mono_ns,
            });
        }
    }
    replaced_live_collections(audit, &dropped, &mut judge);
    judge.result("aborted rounds' temporary collections and replaced live ones were dropped by later owners", None)
}

/// A collection that was live, was replaced by another's switch, and was never dropped although a
/// round began its epoch after the replacement and created a collection of its own (so it had read
/// the tenant after it and passed the point where leftovers are dropped): a leak, which grows the index by one
/// collection per such round. Named with the round that made it live and the round that left it.
fn replaced_live_collections(audit: &[&AuditRecord], dropped: &HashSet<&str>, judge: &mut Judge) {
    let accepted: Vec<&AuditRecord> = audit.iter().copied().filter(|r| r.accepted).collect();
    // When each round began at the store (its epoch, before it read the tenant). A round whose
    // fences come from Redis begins no epoch: its reading of the tenant is not in the audit, so it
    // is not taken as proof that a leftover was there to drop.
    let mut began: HashMap<&str, u64> = HashMap::new();
    for r in accepted.iter().filter(|r| r.op == StoreOp::BeginEpoch) {
        began.entry(r.token.as_str()).or_insert(r.seq);
    }
    let switches: Vec<&AuditRecord> = accepted.iter().copied().filter(|r| r.op == StoreOp::SwitchAlias).collect();
    let last_live = switches.last().and_then(|r| r.collection.as_deref());
    for (i, made_live) in switches.iter().enumerate() {
        let Some(c) = made_live.collection.as_deref() else { continue };
        if Some(c) == last_live
            || dropped.contains(c)
            || switches[i + 1..].iter().any(|r| r.collection.as_deref() == Some(c))
        {
            continue;
        }
        let Some(replaced) = switches[i + 1..].iter().find(|r| r.collection.as_deref() != Some(c)) else { continue };
        let later = accepted.iter().find(|r| {
            r.op == StoreOp::CreateCollection && began.get(r.token.as_str()).is_some_and(|b| *b > replaced.seq)
        });
        if let Some(later) = later {
            judge.violate(|| Violation {
                summary: format!(
                    "collection {c} (made live by {} under fence {}, replaced at seq {}) was never dropped, although {}'s round under fence {} began after and created {}: a leak",
                    made_live.node,
                    made_live.fence,
                    replaced.seq,
                    later.node,
                    later.fence,
                    later.collection.as_deref().unwrap_or("")
                ),
                evidence: vec![evidence("made live, never dropped", made_live), evidence("a later round's create", later)],
                faults_active: vec![],
                at_ns: later.mono_ns,
            });
        }
    }
}

/// The liveness bound in force, ms: the header's, lengthened by twice what this run's slowest
/// complete round with no fault in effect took beyond the round the bound was built from (the
/// header's `round_estimate_ms`). The estimate counts the pipeline's model and store time only;
/// on a loaded machine (load 17 on 2 cores, a soak) a round of 40 batches took 3.8 s against
/// 2.1 s estimated, and a correct lease missed the bound by 400 ms. A round is an acquisition
/// (its node's stamp) to its accepted persist (the store's); one that never completes does not
/// count, so a lease that stops syncing still fails.
fn liveness_bound_ms(h: &Header, nodes: &[NodeLine], audit: &[&AuditRecord], faults: &Faults) -> (u64, Option<u64>) {
    let Some(estimate) = h.round_estimate_ms else { return (h.liveness_bound_ms, None) };
    let acquired: HashMap<&str, u64> = nodes
        .iter()
        .filter_map(|n| match n.kind {
            EventKind::Acquired { token, .. } => Some((token.as_str(), n.sent_ns)),
            _ => None,
        })
        .collect();
    let slowest = audit
        .iter()
        .filter(|a| a.accepted && a.op == StoreOp::PersistRecord)
        .filter_map(|a| acquired.get(a.token.as_str()).map(|from| (*from, a.mono_ns)))
        .filter(|(from, to)| from < to && !faults.covers_any(|_| true, *from, *to))
        .map(|(from, to)| (to - from) / 1_000_000)
        .max();
    match slowest {
        Some(ms) if ms > estimate => (h.liveness_bound_ms.saturating_add(2 * (ms - estimate)), Some(ms)),
        _ => (h.liveness_bound_ms, None),
    }
}

/// How far past the last heal (`healed`) a healed fault's effect may last, ms: a forward step of
/// Redis's clock (`outlasts_ms` on its `healed` line; on no other kind of line is it believed,
/// and never beyond the longest step a scenario may ask for).
fn outlasting(faults: &[&FaultEvent], healed: u64) -> u64 {
    faults
        .iter()
        .filter(|f| f.phase == FaultPhase::Healed && f.fault == FaultKind::ClockJump && f.target == "redis-primary")
        .filter_map(|f| {
            let ms = f.outlasts_ms?.min(crate::scenario::JUMP_MS_MAX);
            Some(f.at_ns.saturating_add(ms.saturating_mul(1_000_000)).saturating_sub(healed) / 1_000_000)
        })
        .max()
        .unwrap_or(0)
}

/// After the last fault heals, a complete sync (an accepted persist) lands within the bound (and
/// within what a healed fault's effect outlasts its heal by, see [`outlasting`]).
fn liveness(
    header: Option<&Header>,
    (nodes, audit): (&[NodeLine], &[&AuditRecord]),
    (faults, windows): (&[&FaultEvent], &Faults),
    end_ns: u64,
) -> PropertyResult {
    let name = "liveness".to_owned();
    let result = |status, sentence: String| PropertyResult {
        name: name.clone(),
        status,
        sentence,
        violations: vec![],
        violation_count: 0,
    };
    let Some(h) = header else { return result(PropertyStatus::Inconclusive, "no header: no liveness bound".into()) };
    let healed = faults.iter().filter(|f| f.phase == FaultPhase::Healed).map(|f| f.at_ns).max().unwrap_or(h.started_ns);
    let (mut bound_ms, slowest) = liveness_bound_ms(h, nodes, audit, windows);
    let outlasts_ms = outlasting(faults, healed);
    bound_ms = bound_ms.saturating_add(outlasts_ms);
    let mut why: Vec<String> = slowest.map(|ms| format!("rounds here took up to {ms} ms")).into_iter().collect();
    if outlasts_ms > 0 {
        why.push(format!("a forward step of Redis's clock outlasts its heal by {outlasts_ms} ms"));
    }
    let bound = if why.is_empty() {
        format!("bound {bound_ms} ms")
    } else {
        format!("bound {bound_ms} ms: {}", why.join("; "))
    };
    let bound_ns = bound_ms.saturating_mul(1_000_000);
    let synced = audit.iter().find(|a| a.accepted && a.op == StoreOp::PersistRecord && a.mono_ns >= healed);
    match synced {
        Some(a) if a.mono_ns - healed <= bound_ns => result(
            PropertyStatus::Held,
            format!(
                "a complete sync landed {} ms after the last fault healed ({bound})",
                (a.mono_ns - healed) / 1_000_000
            ),
        ),
        _ if end_ns < healed.saturating_add(bound_ns) => result(
            PropertyStatus::Inconclusive,
            format!(
                "the run ended {} ms after the last fault healed, before the liveness bound ({bound})",
                end_ns.saturating_sub(healed) / 1_000_000
            ),
        ),
        _ => {
            let mut judge = Judge::new("liveness");
            judge.violate(|| Violation {
                summary: format!("no complete sync landed within {bound_ms} ms after the last fault healed ({bound})"),
                evidence: vec![],
                faults_active: vec![],
                at_ns: healed.saturating_add(bound_ns),
            });
            judge.result("", None)
        }
    }
}

/// Faults the harness could not apply, verify or undo: not the lease's doing, so no verdict stands.
fn fault_holes(faults: &[&FaultEvent], snapshot: Option<&Snapshot>, inconclusive: &mut Vec<String>) {
    let mut seen: BTreeMap<u64, (FaultKind, &str, Vec<FaultPhase>)> = BTreeMap::new();
    for f in faults {
        seen.entry(f.id).or_insert((f.fault, &f.target, vec![])).2.push(f.phase);
        match f.phase {
            FaultPhase::Failed => {
                inconclusive.push(format!("fault #{} {} on {} failed: {}", f.id, f.fault, f.target, f.detail));
            }
            FaultPhase::HealFailed => inconclusive.push(format!(
                "fault #{} {} on {} could not be healed (it may have stayed in effect): {}",
                f.id, f.fault, f.target, f.detail
            )),
            _ => {}
        }
    }
    for (id, (fault, target, phases)) in seen {
        if phases.contains(&FaultPhase::Requested)
            && !phases.contains(&FaultPhase::Verified)
            && !phases.contains(&FaultPhase::Failed)
        {
            inconclusive.push(format!("fault #{id} {fault} on {target} was never verified in effect"));
        }
    }
    for id in snapshot.map(|s| s.faults_still_applied.as_slice()).unwrap_or_default() {
        inconclusive.push(format!("fault #{id} was still applied when the run ended: the harness could not undo it"));
    }
}

fn silence_holes(
    h: &Header,
    nodes: &[NodeLine],
    observer: &[&ObserverSample],
    faults: &Faults,
    end_ns: u64,
    out: &mut Vec<String>,
) {
    let limit = h.node_silence_ms.saturating_mul(1_000_000);
    let mut last: BTreeMap<&str, u64> = BTreeMap::new();
    for n in nodes {
        let prev = last.insert(n.node, n.at_ns).unwrap_or(n.at_ns);
        if n.at_ns.saturating_sub(prev) > limit && !faults.covers(n.node, prev, n.at_ns) {
            out.push(format!(
                "node {} was silent for {} ms with no fault declared on it",
                n.node,
                (n.at_ns - prev) / 1_000_000
            ));
        }
    }
    for (node, at) in &last {
        if end_ns.saturating_sub(*at) > limit && !faults.covers(node, *at, end_ns) {
            out.push(format!(
                "node {node} stopped reporting {} ms before the end with no fault declared on it",
                (end_ns - at) / 1_000_000
            ));
        }
    }
    let gap = h.observer_gap_ms.saturating_mul(1_000_000);
    let mut seen: BTreeMap<&str, u64> = BTreeMap::new();
    for o in observer {
        let prev = seen.insert(&o.instance, o.at_ns).unwrap_or(o.at_ns);
        if o.at_ns.saturating_sub(prev) > gap && !faults.covers(&o.instance, prev, o.at_ns) {
            out.push(format!(
                "the observer saw nothing of {} for {} ms with no fault declared on it",
                o.instance,
                (o.at_ns - prev) / 1_000_000
            ));
        }
    }
}

/// Work done after truly losing an acquisition: from the loss to the last action under it.
struct Waste<'a> {
    node: &'a str,
    token: &'a str,
    lost_ns: u64,
    last_ns: u64,
}

/// With a budget declared: after truly losing ownership (its own report, a successor's acquire,
/// or the observer seeing a newer holder, whichever came first), no node works longer than the
/// budget under that acquisition. A node paused (SIGSTOP) in between is excused: it cannot react,
/// which is what fencing is for.
fn bounded_waste(budget_ms: Option<u64>, wastes: &[Waste], faults: &Faults) -> PropertyResult {
    let mut judge = Judge::new("bounded_waste");
    let Some(budget) = budget_ms else {
        return judge.result("", Some("the scenario declares no waste budget"));
    };
    for w in wastes {
        let ms = (w.last_ns - w.lost_ns) / 1_000_000;
        if ms > budget && !faults.covers_kind(FaultKind::Pause, w.node, w.lost_ns, w.last_ns) {
            judge.violate(|| Violation {
                summary: format!(
                    "{} worked {ms} ms under token {} after losing ownership (budget {budget} ms)",
                    w.node, w.token
                ),
                evidence: vec![Evidence {
                    label: "last action after the loss".into(),
                    seq: None,
                    node: w.node.into(),
                    token: w.token.into(),
                    fence: 0,
                    what: format!("{ms} ms after the loss"),
                    at_ns: w.last_ns,
                }],
                faults_active: faults.active_at(w.lost_ns),
                at_ns: w.last_ns,
            });
        }
    }
    judge.result(&format!("every node stopped within {budget} ms of truly losing ownership"), None)
}

#[cfg(test)]
mod tests;

mod integrity;
mod measure;

mod drift;

mod acquisition;
mod declared;
mod wire;
