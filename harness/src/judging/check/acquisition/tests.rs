use leasequake_reports::history::{EventKind, HistoryLine, NodeEvent, Snapshot, StoreOp, HISTORY_VERSION};
use leasequake_reports::{PropertyResult, PropertyStatus};

use crate::check::check;

const MS: u64 = 1_000_000;
const T: &str = "n1/1/0/a";

/// A history of node events at explicit stamps (ms), in the order given: the file's order.
struct H {
    lines: Vec<HistoryLine>,
}

impl H {
    fn new(ttl_ms: Option<u64>) -> Self {
        let mut header = crate::check::tests::header(None);
        header.version = HISTORY_VERSION;
        header.liveness_bound_ms = 60_000;
        header.node_silence_ms = 60_000;
        header.observer_gap_ms = 60_000;
        header.renew_ms = Some(30);
        header.ttl_ms = ttl_ms;
        Self { lines: vec![HistoryLine::Header(header)] }
    }
    fn at(self, ms: u64, kind: EventKind) -> Self {
        self.on("n1", 1, ms, kind)
    }
    fn on(mut self, node: &str, incarnation: u64, ms: u64, kind: EventKind) -> Self {
        let at = ms * MS;
        self.lines.push(HistoryLine::Node {
            node: node.into(),
            incarnation,
            received_ns: at,
            event: NodeEvent { mono_ns: at, round: 1, kind },
        });
        self
    }
    fn judge(mut self, property: &str) -> PropertyResult {
        self.lines.push(HistoryLine::Snapshot(Snapshot {
            ended_ns: 10_000 * MS,
            faults_still_applied: vec![],
            temporary_collections_left: vec![],
            versions: Default::default(),
            extended_ms: None,
            witness_gaps: Vec::new(),
            stopped: None,
            seal: None,
        }));
        crate::history::seal(&mut self.lines);
        let result = check(&self.lines);
        result.properties.into_iter().find(|p| p.name == property).unwrap()
    }
}

fn acquired(sent_ms: Option<u64>) -> EventKind {
    EventKind::Acquired { token: T.into(), fence: 1, sent_ns: sent_ms.map(|m| m * MS) }
}
fn renewed(sent_ms: Option<u64>) -> EventKind {
    EventKind::Renewed { token: T.into(), sent_ns: sent_ms.map(|m| m * MS) }
}
fn passed(number: u8, decided_ms: Option<u64>) -> EventKind {
    EventKind::CheckpointPassed { token: T.into(), number, decided_ns: decided_ms.map(|m| m * MS) }
}
fn sent(call: u64, decided_ms: Option<u64>) -> EventKind {
    EventKind::StoreCallSent {
        token: T.into(),
        fence: 1,
        op: StoreOp::PersistRecord,
        call,
        decided_ns: decided_ms.map(|m| m * MS),
    }
}
fn model(ms: u64, decided_ms: Option<u64>) -> EventKind {
    EventKind::ModelCall { token: T.into(), batch: 0, ms, decided_ns: decided_ms.map(|m| m * MS) }
}
fn released() -> EventKind {
    EventKind::Released { token: T.into(), outcome: "deleted".into() }
}
fn lost() -> EventKind {
    EventKind::OwnershipLost { token: T.into(), reason: "renewal_failed".into(), checkpoint: None }
}

#[track_caller]
fn assert_status(p: &PropertyResult, want: PropertyStatus) {
    assert_eq!(p.status, want, "{}: {}", p.name, p.sentence);
}

#[test]
fn a_write_after_the_release_violates_sticky_loss_whatever_the_line_order() {
    let bug = H::new(Some(100)).at(1, acquired(Some(0))).at(10, released()).at(11, sent(1, Some(11)));
    let p = bug.judge("sticky_loss");
    assert_status(&p, PropertyStatus::Violated);
    assert!(p.sentence.contains("sent store call 1") && p.sentence.contains("released it"), "{}", p.sentence);
    // The same events with the two lines swapped in the file: the stamps still say the order.
    let swapped = H::new(Some(100)).at(1, acquired(Some(0))).at(11, sent(1, Some(11))).at(10, released());
    assert_status(&swapped.judge("sticky_loss"), PropertyStatus::Violated);
    let correct = H::new(Some(100)).at(1, acquired(Some(0))).at(9, sent(1, Some(9))).at(10, released());
    assert_status(&correct.judge("sticky_loss"), PropertyStatus::Held);
}

#[test]
fn a_checkpoint_or_model_call_begun_after_the_loss_violates_sticky_loss() {
    let checkpoint = H::new(Some(100)).at(1, acquired(Some(0))).at(10, lost()).at(12, passed(3, Some(12)));
    assert_status(&checkpoint.judge("sticky_loss"), PropertyStatus::Violated);
    // A model call that began before the loss and finished after it is work in flight, not new
    // work: legal. One that began after it is not.
    let in_flight = H::new(Some(100)).at(1, acquired(Some(0))).at(10, lost()).at(30, model(25, Some(5)));
    assert_status(&in_flight.judge("sticky_loss"), PropertyStatus::Held);
    let begun_after = H::new(Some(100)).at(1, acquired(Some(0))).at(10, lost()).at(30, model(15, Some(15)));
    assert_status(&begun_after.judge("sticky_loss"), PropertyStatus::Violated);
    // Protocol 1 reports no decision stamp: the start is the end less the reported time.
    let v1_in_flight = H::new(None).at(1, acquired(None)).at(10, lost()).at(30, model(25, None));
    assert_status(&v1_in_flight.judge("sticky_loss"), PropertyStatus::Held);
    let v1_after = H::new(None).at(1, acquired(None)).at(10, lost()).at(30, model(10, None));
    assert_status(&v1_after.judge("sticky_loss"), PropertyStatus::Violated);
}

#[test]
fn a_renewal_sent_after_the_release_violates_sticky_loss_one_in_flight_does_not() {
    let leaked = H::new(Some(100)).at(1, acquired(Some(0))).at(10, released()).at(45, renewed(Some(40)));
    let p = leaked.judge("sticky_loss");
    assert_status(&p, PropertyStatus::Violated);
    assert!(p.sentence.contains("sent a renewal"), "{}", p.sentence);
    let in_flight = H::new(Some(100)).at(1, acquired(Some(0))).at(10, released()).at(12, renewed(Some(8)));
    assert_status(&in_flight.judge("sticky_loss"), PropertyStatus::Held);
    // Protocol 1: one renewal answered after the end may have been in flight; a second was not.
    let v1_one = H::new(None).at(1, acquired(None)).at(10, released()).at(12, renewed(None));
    assert_status(&v1_one.judge("sticky_loss"), PropertyStatus::Held);
    let v1_two = v1_one_then_another();
    assert_status(&v1_two.judge("sticky_loss"), PropertyStatus::Violated);
}

fn v1_one_then_another() -> H {
    H::new(None).at(1, acquired(None)).at(10, released()).at(12, renewed(None)).at(42, renewed(None))
}

#[test]
fn an_acquisition_left_open_when_the_node_acquires_again_or_stops_violates_acquisitions_end() {
    let abort = EventKind::RoundAborted { token: T.into(), lost: false, reason: "store rejected".into() };
    let leaked = H::new(Some(100)).at(1, acquired(Some(0))).at(5, abort.clone()).at(8, EventKind::AcquireAttempt);
    let p = leaked.judge("acquisitions_end");
    assert_status(&p, PropertyStatus::Violated);
    assert!(p.sentence.contains("began a new acquire") && p.sentence.contains(T), "{}", p.sentence);
    let stopped = H::new(Some(100)).at(1, acquired(Some(0))).at(5, EventKind::Stopped);
    assert_status(&stopped.judge("acquisitions_end"), PropertyStatus::Violated);
    let released_first =
        H::new(Some(100)).at(1, acquired(Some(0))).at(5, abort).at(6, released()).at(8, EventKind::AcquireAttempt);
    assert_status(&released_first.judge("acquisitions_end"), PropertyStatus::Held);
    let lost_first = H::new(Some(100)).at(1, acquired(Some(0))).at(5, lost()).at(8, EventKind::AcquireAttempt);
    assert_status(&lost_first.judge("acquisitions_end"), PropertyStatus::Held);
    // A crash ends the incarnation's acquisitions: the next incarnation starts afresh.
    let crashed = H::new(Some(100)).at(1, acquired(Some(0))).on("n1", 2, 50, EventKind::AcquireAttempt);
    assert_status(&crashed.judge("acquisitions_end"), PropertyStatus::Held);
}

#[test]
fn a_decision_past_the_confirmed_send_plus_the_ttl_violates_within_validity() {
    let late = H::new(Some(100)).at(1, acquired(Some(0))).at(150, passed(3, Some(150)));
    let p = late.judge("within_validity");
    assert_status(&p, PropertyStatus::Violated);
    assert!(p.sentence.contains("50 ms past its validity"), "{}", p.sentence);
    let renewed_in_time =
        H::new(Some(100)).at(1, acquired(Some(0))).at(82, renewed(Some(80))).at(150, passed(3, Some(150)));
    assert_status(&renewed_in_time.judge("within_validity"), PropertyStatus::Held);
    // Validity counted from the reply instead of the send: the acquire was sent at 0 and answered
    // at 60, so a store call decided at 120 is past the ttl although 60 + 100 is not.
    let from_reply = H::new(Some(100)).at(60, acquired(Some(0))).at(120, sent(1, Some(120)));
    assert_status(&from_reply.judge("within_validity"), PropertyStatus::Violated);
    // A renewal sent after the decision cannot have confirmed it.
    let later_renewal =
        H::new(Some(100)).at(1, acquired(Some(0))).at(150, model(5, Some(145))).at(160, renewed(Some(146)));
    assert_status(&later_renewal.judge("within_validity"), PropertyStatus::Violated);
}

#[test]
fn within_validity_is_not_applicable_without_stamps_or_ttl() {
    let v1 = H::new(Some(100)).at(1, acquired(None)).at(150, passed(3, None));
    assert_status(&v1.judge("within_validity"), PropertyStatus::NotApplicable);
    let no_ttl = H::new(None).at(1, acquired(Some(0))).at(150, passed(3, Some(150)));
    let p = no_ttl.judge("within_validity");
    assert_status(&p, PropertyStatus::NotApplicable);
    assert!(p.sentence.contains("no ttl"), "{}", p.sentence);
}
