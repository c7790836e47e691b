use leasequake_reports::history::{
    lease_key, EventKind, FaultEvent, FaultKind, FaultPhase, HistoryLine, NodeEvent, Renewals, Snapshot, StoreOp,
    HISTORY_VERSION,
};
use leasequake_reports::wire::{Resp, WireRecord, WireReply, WireRequest};
use leasequake_reports::{PropertyResult, PropertyStatus, Verdict};

use super::super::check;

const MS: u64 = 1_000_000;
const ACQUIRE: &str = "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return {1, redis.call('INCR', KEYS[2])} end return {0, redis.call('PTTL', KEYS[1])}";
const RENEW: &str =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0";
const RELEASE: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

/// Histories with witness records, each line at the ms it names (a ttl of 1500 ms, renewals
/// every 500 ms).
struct W {
    lines: Vec<HistoryLine>,
    seqs: std::collections::BTreeMap<String, u64>,
    witness: bool,
}

fn lease() -> String {
    lease_key("t")
}

impl W {
    fn new() -> Self {
        Self { lines: Vec::new(), seqs: Default::default(), witness: true }
    }

    fn wire(mut self, link: &str, at: u64, request: WireRequest, reply: Option<(WireReply, Option<u64>)>) -> Self {
        let seq = self.seqs.entry(link.into()).or_insert(0);
        *seq += 1;
        let (reply, reply_ns) = match reply {
            Some((r, at)) => (Some(r), at.map(|a| a * MS)),
            None => (None, None),
        };
        self.lines.push(HistoryLine::Wire(WireRecord {
            seq: *seq,
            link: link.into(),
            conn: 1,
            sent_ns: at * MS,
            forwarded: true,
            request,
            reply_ns,
            reply,
            held: false,
            lost: false,
        }));
        self
    }

    fn redis(self, node: &str, at: u64, args: &[&str], reply: Resp, reply_at: u64) -> Self {
        let request = WireRequest::Redis { args: args.iter().map(|a| (*a).to_owned()).collect() };
        self.wire(&format!("{node}-redis"), at, request, Some((WireReply::Redis(reply), Some(reply_at))))
    }

    fn acquire(self, node: &str, token: &str, at: u64, reply_at: u64) -> Self {
        let (l, f) = (lease(), leasequake_reports::history::fence_key("t"));
        let won = Resp::Array(Some(vec![Resp::Int(1), Resp::Int(1)]));
        self.redis(node, at, &["EVAL", ACQUIRE, "2", &l, &f, token, "1500"], won, reply_at)
    }

    fn renew(self, node: &str, token: &str, at: u64, reply_at: u64, ok: bool) -> Self {
        let l = lease();
        self.redis(node, at, &["EVAL", RENEW, "1", &l, token, "1500"], Resp::Int(i64::from(ok)), reply_at)
    }

    fn release(self, node: &str, token: &str, at: u64, reply_at: u64) -> Self {
        let l = lease();
        self.redis(node, at, &["EVAL", RELEASE, "1", &l, token], Resp::Int(1), reply_at)
    }

    fn check_key(self, node: &str, token: &str, at: u64, reply_at: u64) -> Self {
        let l = lease();
        self.redis(node, at, &["GET", &l], Resp::Bulk(Some(token.into())), reply_at)
    }

    fn http(
        self,
        link: &str,
        token: &str,
        (call, batch): (Option<u64>, Option<u64>),
        at: u64,
        reply_at: Option<u64>,
    ) -> Self {
        let path = if link.ends_with("model") { "/v1/embed" } else { "/v1/upsert" };
        let request = WireRequest::Http {
            method: "POST".into(),
            path: path.into(),
            token: Some(token.into()),
            fence: Some(1),
            call,
            batch,
        };
        self.wire(link, at, request, Some((WireReply::Http { status: 200 }, reply_at)))
    }

    fn store(self, node: &str, token: &str, call: u64, at: u64, reply_at: u64) -> Self {
        self.http(&format!("{node}-store"), token, (Some(call), None), at, Some(reply_at))
    }

    fn model(self, node: &str, token: &str, batch: u64, at: u64, reply_at: u64) -> Self {
        self.http(&format!("{node}-model"), token, (None, Some(batch)), at, Some(reply_at))
    }

    /// Model calls every `every` ms from `from` to `to`, each answered `took` ms later.
    fn model_calls(mut self, node: &str, token: &str, (from, to, every, took): (u64, u64, u64, u64)) -> Self {
        let mut t = from;
        let mut batch = 0;
        while t <= to {
            self = self.model(node, token, batch, t, t + took);
            t += every;
            batch += 1;
        }
        self
    }

    fn event(mut self, node: &str, at: u64, kind: EventKind) -> Self {
        self.lines.push(HistoryLine::Node {
            node: node.into(),
            incarnation: 1,
            received_ns: at * MS + 1,
            event: NodeEvent { mono_ns: at * MS + 1, round: 1, kind },
        });
        self
    }

    fn fault(mut self, kind: FaultKind, target: &str, from: u64, to: u64) -> Self {
        for (phase, at) in [(FaultPhase::Requested, from), (FaultPhase::Verified, from), (FaultPhase::Healed, to)] {
            self.lines.push(HistoryLine::Fault(FaultEvent {
                id: 1,
                fault: kind,
                target: target.into(),
                phase,
                at_ns: at * MS,
                detail: String::new(),
                redis_link: None,
                outlasts_ms: None,
            }));
        }
        self
    }

    fn history(mut self) -> Vec<HistoryLine> {
        let mut header = super::super::tests::header(None);
        header.version = HISTORY_VERSION;
        header.tenant = "t".into();
        header.ttl_ms = Some(1500);
        header.renew_ms = Some(500);
        header.witness = self.witness;
        header.started_ns = 0;
        header.node_silence_ms = 600_000;
        header.liveness_bound_ms = 600_000;
        // Each source in its own order: node lines by stamp, the rest as written.
        self.lines.sort_by_key(|l| match l {
            HistoryLine::Node { received_ns, .. } => (0, *received_ns),
            HistoryLine::Fault(f) => (1, f.at_ns),
            _ => (2, 0),
        });
        let mut lines = vec![HistoryLine::Header(header)];
        lines.extend(self.lines);
        lines.push(HistoryLine::Snapshot(Snapshot {
            ended_ns: 100_000 * MS,
            faults_still_applied: vec![],
            temporary_collections_left: vec![],
            versions: Default::default(),
            extended_ms: None,
            witness_gaps: vec![],
            stopped: None,
            seal: None,
        }));
        crate::history::seal(&mut lines);
        lines
    }

    fn judge(self, property: &str) -> PropertyResult {
        let result = check(&self.history());
        result.properties.into_iter().find(|p| p.name == property).unwrap()
    }
}

#[track_caller]
fn held(p: &PropertyResult) {
    assert_eq!(p.status, PropertyStatus::Held, "{p:?}");
}

#[track_caller]
fn violated(p: &PropertyResult, says: &str) {
    assert_eq!(p.status, PropertyStatus::Violated, "{p:?}");
    assert!(p.violations[0].summary.contains(says), "{:?}", p.violations[0].summary);
}

/// A holder whose renewals stall after its acquire (sent at 0, ttl 1500): model calls every 30 ms,
/// each answered 20 ms later, until `stop` ms.
fn stalled_holder(stop: u64) -> W {
    W::new().acquire("n1", "n1/1/0/a", 0, 100).model_calls("n1", "n1/1/0/a", (110, stop, 30, 20))
}

#[test]
fn a_call_decided_after_the_validity_on_the_wire_fails_and_its_twin_that_stops_in_time_holds() {
    // Validity counted from the reply (100 ms late) lets calls run to 1600: past 1500.
    violated(&stalled_holder(1590).judge("wire_within_validity"), "past its validity on the wire");
    // Counted from the send, less a margin: the last call starts at 1460, before 1483.
    held(&stalled_holder(1470).judge("wire_within_validity"));
}

#[test]
fn a_call_committed_before_a_pause_is_not_decided_after_the_validity() {
    // The last reply it read came at 1400; the pause holds the next send to 4000.
    let paused = W::new()
        .acquire("n1", "n1/1/0/a", 0, 10)
        .check_key("n1", "n1/1/0/a", 1390, 1400)
        .store("n1", "n1/1/0/a", 1, 4000, 4010);
    held(&paused.judge("wire_within_validity"));
}

#[test]
fn a_call_sent_while_another_is_outstanding_is_not_judged() {
    let side_by_side = W::new()
        .acquire("n1", "n1/1/0/a", 0, 10)
        .model("n1", "n1/1/0/a", 0, 100, 3000)
        .model("n1", "n1/1/0/a", 1, 2000, 2010);
    held(&side_by_side.judge("wire_within_validity"));
}

#[test]
fn renewals_extend_the_validity_and_a_write_with_no_acquisition_fails() {
    let renewed = stalled_holder(2900)
        .renew("n1", "n1/1/0/a", 500, 520, true)
        .renew("n1", "n1/1/0/a", 1000, 1020, true)
        .renew("n1", "n1/1/0/a", 1500, 1520, true);
    held(&renewed.judge("wire_within_validity"));
    let unleased = W::new().check_key("n2", "x", 10, 20).store("n2", "n2/1/0/b", 1, 30, 40);
    violated(&unleased.judge("wire_within_validity"), "with no acquisition on the wire");
}

#[test]
fn a_holder_whose_renewals_stop_fails_keeps_renewing_unless_a_fault_holds_them() {
    let holder = || {
        stalled_holder(1400)
            .renew("n1", "n1/1/0/a", 400, 410, true)
            .renew("n1", "n1/1/0/a", 800, 810, true)
            .renew("n1", "n1/1/0/a", 1200, 1210, true)
    };
    // The interval is 500 ms: acting past 1200 + 1250 with no renewal since is a stopped watchdog.
    let stopped = holder().model_calls("n1", "n1/1/0/a", (1430, 2600, 30, 20));
    violated(&stopped.judge("wire_keeps_renewing"), "its renewals had stopped");
    let stalled =
        holder().model_calls("n1", "n1/1/0/a", (1430, 2600, 30, 20)).fault(FaultKind::StallRenewal, "n1", 1250, 2600);
    held(&stalled.judge("wire_keeps_renewing"));
    held(&holder().judge("wire_keeps_renewing"));
}

fn hidden_hello() -> EventKind {
    EventKind::Hello { protocol: 3, implementation: "lib".into(), lease_key: None, renewals: Some(Renewals::Hidden) }
}

#[test]
fn a_library_that_renews_out_of_sight_is_held_to_its_own_schedule_on_the_wire() {
    // n2's library renews every 1000 ms (two thirds of its ttl); n1's round is shorter than that.
    let library = || {
        W::new()
            .event("n1", 0, hidden_hello())
            .event("n2", 0, hidden_hello())
            .acquire("n2", "n2/1/0/b", 0, 10)
            .renew("n2", "n2/1/0/b", 1000, 1010, true)
            .renew("n2", "n2/1/0/b", 2000, 2010, true)
            .renew("n2", "n2/1/0/b", 3000, 3010, true)
            .acquire("n1", "n1/1/0/a", 5000, 5010)
    };
    // 1300 ms after its acquire: late for the 500 ms asked of a node that renews in sight, on time
    // for its library.
    let on_time = library().check_key("n1", "n1/1/0/a", 6290, 6295).store("n1", "n1/1/0/a", 1, 6300, 6310);
    held(&on_time.judge("wire_keeps_renewing"));
    let stopped = library().check_key("n1", "n1/1/0/a", 7590, 7595).store("n1", "n1/1/0/a", 1, 7600, 7610);
    violated(&stopped.judge("wire_keeps_renewing"), "its library renewing every 1000 ms");
    // No renewal of any node seen: the ttl its acquire set is the whole allowance.
    let unseen = || W::new().event("n1", 0, hidden_hello()).acquire("n1", "n1/1/0/a", 0, 10);
    held(
        &unseen()
            .check_key("n1", "n1/1/0/a", 1390, 1395)
            .store("n1", "n1/1/0/a", 1, 1400, 1410)
            .judge("wire_keeps_renewing"),
    );
    let past = unseen().check_key("n1", "n1/1/0/a", 1590, 1595).store("n1", "n1/1/0/a", 1, 1600, 1610);
    violated(&past.judge("wire_keeps_renewing"), "no renewal of its library seen");
}

#[test]
fn renewing_or_writing_after_a_release_fails() {
    let base = || {
        W::new().acquire("n1", "n1/1/0/a", 0, 10).store("n1", "n1/1/0/a", 1, 20, 30).release("n1", "n1/1/0/a", 40, 50)
    };
    held(&base().renew("n1", "n1/1/0/a", 45, 60, false).judge("wire_after_end"));
    let leaked = base().renew("n1", "n1/1/0/a", 45, 60, false).renew("n1", "n1/1/0/a", 545, 550, false);
    violated(&leaked.judge("wire_after_end"), "kept renewing token n1/1/0/a after releasing it");
    let late_write = base().store("n1", "n1/1/0/a", 2, 60, 70);
    violated(&late_write.judge("wire_after_end"), "after its release was answered");
}

#[test]
fn renewing_an_acquisition_after_moving_on_to_another_fails() {
    let moved = || {
        W::new()
            .acquire("n1", "n1/1/0/a", 0, 10)
            .renew("n1", "n1/1/0/a", 500, 505, true)
            .acquire("n1", "n1/1/1/b", 900, 910)
    };
    // One renewal on its way when the node moved on is no leak.
    held(&moved().renew("n1", "n1/1/0/a", 1000, 1005, true).judge("wire_after_end"));
    let leaked = moved().renew("n1", "n1/1/0/a", 1000, 1005, true).renew("n1", "n1/1/0/a", 1500, 1505, true);
    violated(&leaked.judge("wire_after_end"), "after it began acquiring another token");
}

#[test]
fn working_on_past_a_refused_renewal_fails_and_stopping_within_an_interval_holds() {
    let refused = || W::new().acquire("n1", "n1/1/0/a", 0, 10).renew("n1", "n1/1/0/a", 500, 505, false);
    held(&refused().model_calls("n1", "n1/1/0/a", (20, 980, 30, 20)).judge("wire_after_end"));
    let on = refused().model_calls("n1", "n1/1/0/a", (20, 1400, 30, 20));
    violated(&on.judge("wire_after_end"), "was refused by Redis, and it sent");
    let again = refused().renew("n1", "n1/1/0/a", 1000, 1005, false);
    violated(&again.judge("wire_after_end"), "renewed it again");
}

#[test]
fn reports_that_the_wire_does_not_bear_out_fail_testimony() {
    let t = "n1/1/0/a";
    let honest = || {
        W::new()
            .acquire("n1", t, 0, 10)
            .event("n1", 11, EventKind::Acquired { token: t.into(), fence: 1, sent_ns: Some(0) })
            .renew("n1", t, 500, 505, true)
            .event("n1", 506, EventKind::Renewed { token: t.into(), sent_ns: Some(500 * MS - 1) })
            .event(
                "n1",
                599,
                EventKind::StoreCallSent {
                    token: t.into(),
                    fence: 1,
                    op: StoreOp::Upsert,
                    call: 1,
                    decided_ns: Some(599 * MS),
                },
            )
            .store("n1", t, 1, 600, 610)
    };
    held(&honest().judge("testimony"));
    let invented = honest().event("n1", 900, EventKind::Renewed { token: t.into(), sent_ns: None });
    violated(&invented.judge("testimony"), "that no renewal answered");
    let silent = honest().store("n1", t, 2, 700, 710);
    violated(&silent.judge("testimony"), "without reporting it");
    // A call reported sent that never got an answer may never have left (held at a sync point).
    let held_back = || {
        honest().event(
            "n1",
            800,
            EventKind::StoreCallSent { token: t.into(), fence: 1, op: StoreOp::Upsert, call: 3, decided_ns: None },
        )
    };
    held(&held_back().judge("testimony"));
    let invented_answer = held_back().event("n1", 810, EventKind::StoreCallAcked { token: t.into(), call: 3 });
    violated(&invented_answer.judge("testimony"), "its store link never carried it");
    let backdated = W::new().acquire("n1", t, 0, 10).renew("n1", t, 500, 505, true).event(
        "n1",
        506,
        EventKind::Renewed { token: t.into(), sent_ns: Some(503 * MS) },
    );
    violated(&backdated.judge("testimony"), "that no renewal answered");
}

#[test]
fn without_a_witness_the_wire_properties_are_not_applicable_and_the_verdict_stands() {
    let mut w = stalled_holder(1590);
    w.witness = false;
    w.lines.retain(|l| !matches!(l, HistoryLine::Wire(_)));
    let r = check(&w.history());
    for name in ["wire_within_validity", "wire_keeps_renewing", "wire_after_end", "testimony"] {
        let p = r.properties.iter().find(|p| p.name == name).unwrap();
        assert_eq!(p.status, PropertyStatus::NotApplicable, "{p:?}");
        assert!(p.sentence.contains("witnessed nothing"), "{p:?}");
    }
    assert_ne!(r.verdict, Verdict::Fail, "{r:?}");
}

#[test]
fn a_gap_in_a_nodes_records_makes_its_wire_judgement_inconclusive() {
    let mut lines = stalled_holder(1470).history();
    if let Some(HistoryLine::Snapshot(s)) = lines.last_mut() {
        s.witness_gaps = vec!["n1-model: 3 records dropped for room".into()];
    }
    crate::history::seal(&mut lines);
    let r = check(&lines);
    let p = r.properties.iter().find(|p| p.name == "wire_within_validity").unwrap();
    assert_eq!(p.status, PropertyStatus::Inconclusive, "{p:?}");
    assert_eq!(r.verdict, Verdict::Inconclusive);
}

#[test]
fn wire_lines_in_a_history_that_records_no_witness_are_damage() {
    let mut w = stalled_holder(1590);
    w.witness = false;
    let r = check(&w.history());
    assert_eq!(r.verdict, Verdict::Inconclusive);
    assert!(r.inconclusive.iter().any(|i| i.contains("records no witness")), "{:?}", r.inconclusive);
}

#[test]
fn wire_lines_in_a_history_of_an_older_version_are_damage() {
    let mut lines = stalled_holder(1470).history();
    if let HistoryLine::Header(h) = &mut lines[0] {
        h.version = 6;
    }
    crate::history::seal(&mut lines);
    let r = check(&lines);
    assert_eq!(r.verdict, Verdict::Inconclusive);
    assert!(r.inconclusive.iter().any(|i| i.contains("only history version 7")), "{:?}", r.inconclusive);
}

#[test]
fn a_node_that_sent_lines_the_harness_refused_is_not_called_a_liar_by_testimony() {
    // Its report of store call 2 is among the lines refused (a token its protocol's rule refuses):
    // the call looks unreported, yet it was reported. The run is inconclusive for the garbage.
    let t = "n1/1/0/a";
    let base = || {
        W::new()
            .acquire("n1", t, 0, 10)
            .event("n1", 11, EventKind::Acquired { token: t.into(), fence: 1, sent_ns: Some(0) })
            .store("n1", t, 2, 700, 710)
    };
    violated(&base().judge("testimony"), "without reporting it");
    let mut garbled = base();
    garbled.lines.push(HistoryLine::Garbage {
        node: "n1".into(),
        received_ns: 711 * MS,
        raw: r#"{"type":"store_call_sent","call":2}"#.into(),
        why: "token does not start with the node's name".into(),
    });
    let r = check(&garbled.history());
    let p = r.properties.iter().find(|p| p.name == "testimony").unwrap();
    assert_eq!(p.status, PropertyStatus::Inconclusive, "{p:?}");
    assert!(p.sentence.contains("n1 sent lines that are not protocol events"), "{p:?}");
    assert_eq!(r.verdict, Verdict::Inconclusive, "{r:?}");
}

#[test]
fn a_lease_kept_under_another_key_is_not_judged_from_the_wire_and_a_token_set_nowhere_fails() {
    // The node's token is set on a key the witness does not follow: it acted under a lease, just
    // not one on the lease key. Without that SET, it acted under no lease at all: a violation.
    let t = "lock:5e1f:0";
    let nowhere = || W::new().model_calls("n1", t, (110, 400, 30, 20));
    violated(&nowhere().judge("wire_within_validity"), "with no acquisition on the wire before it");
    let elsewhere =
        nowhere().redis("n1", 100, &["SET", "lock:job", t, "NX", "PX", "1500"], Resp::Simple("OK".into()), 105);
    let r = check(&elsewhere.history());
    for name in ["wire_within_validity", "wire_after_end"] {
        let p = r.properties.iter().find(|p| p.name == name).unwrap();
        assert_eq!(p.status, PropertyStatus::Inconclusive, "{p:?}");
        assert!(p.sentence.contains("is set on key lock:job (n1-redis seq 1)"), "{p:?}");
    }
    assert_eq!(r.verdict, Verdict::Inconclusive, "{r:?}");
}
