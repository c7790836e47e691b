//! The properties judged from each node's own events, acquisition by acquisition, with no timing
//! luck: whatever the interleaving with other nodes, a node that acts after its acquisition ended
//! (`sticky_loss`), leaves an acquisition open (`acquisitions_end`), or decides past its own
//! validity (`within_validity`) shows it in its own history. Nothing here knows how any node is
//! built: only the events of docs/node-protocol.md and their stamps count (docs/history.md,
//! "What the acquisition properties read").
//!
//! Order within a node comes from the node's own stamps (its CLOCK_MONOTONIC, else the receipt
//! stamp), never from the order of lines in the file.

use std::collections::{BTreeMap, HashMap};

use leasequake_reports::history::EventKind;
use leasequake_reports::{Evidence, PropertyResult, Violation};

use super::{Faults, Judge, NodeLine};

/// A model call's start when the node reported no decision stamp (protocol 1): its end less its
/// reported wall time, less one ms for the whole-ms rounding of `ms`.
fn model_call_start(end_ns: u64, ms: u64) -> u64 {
    end_ns.saturating_sub(ms.saturating_add(1).saturating_mul(1_000_000))
}

fn node_evidence(label: &str, n: &NodeLine, token: &str, what: String, at_ns: u64) -> Evidence {
    Evidence { label: label.into(), seq: None, node: n.node.into(), token: token.into(), fence: 0, what, at_ns }
}

/// Every acquisition's end, by (node, token).
pub(super) type Ends<'a> = HashMap<(&'a str, &'a str), End>;

/// How an acquisition ended, as its node reported it.
#[derive(Clone)]
pub(super) struct End {
    /// The node's stamp of the end.
    pub(super) at_ns: u64,
    /// What ended it, as a phrase (`reported its loss (renewal_failed)`).
    pub(super) what: String,
}

fn ms_between(from_ns: u64, to_ns: u64) -> u64 {
    to_ns.saturating_sub(from_ns) / 1_000_000
}

/// The end of every acquisition (node, token): the first `ownership_lost` or `released`, by the
/// node's own stamp.
pub(super) fn ends<'a>(nodes: &[NodeLine<'a>]) -> Ends<'a> {
    let mut ends: HashMap<(&str, &str), End> = HashMap::new();
    for n in nodes {
        let (token, what) = match n.kind {
            EventKind::OwnershipLost { token, reason, .. } => (token, format!("reported its loss ({reason})")),
            EventKind::Released { token, outcome } => (token, format!("released it ({outcome})")),
            _ => continue,
        };
        let end = End { at_ns: n.sent_ns, what };
        ends.entry((n.node, token.as_str()))
            .and_modify(|e| {
                if end.at_ns < e.at_ns {
                    *e = end.clone();
                }
            })
            .or_insert(end);
    }
    ends
}

/// Nothing under an acquisition after its node reported it lost or released it: no checkpoint
/// passed, no store call sent, no model call started, no renewal sent. A renewal's send stamp
/// decides (protocol 2); without one, one renewal answered after the end may have been in flight,
/// a second cannot have been.
pub(super) fn sticky_loss(nodes: &[NodeLine], ends: &Ends, faults: &Faults) -> PropertyResult {
    let mut judge = Judge::new("sticky_loss");
    let mut late_renewals: HashMap<(&str, &str), u32> = HashMap::new();
    for n in nodes {
        let (token, what, at) = match n.kind {
            EventKind::CheckpointPassed { token, number, .. } => {
                (token, format!("passed checkpoint {number}"), n.sent_ns)
            }
            EventKind::StoreCallSent { token, op, call, .. } => {
                (token, format!("sent store call {call} ({op:?})"), n.sent_ns)
            }
            EventKind::ModelCall { token, batch, ms, decided_ns } => {
                (token, format!("started model call {batch}"), decided_ns.unwrap_or(model_call_start(n.sent_ns, *ms)))
            }
            EventKind::Renewed { token, sent_ns: Some(sent) } => (token, "sent a renewal".to_owned(), *sent),
            EventKind::Renewed { token, sent_ns: None } => {
                let Some(end) = ends.get(&(n.node, token.as_str())).filter(|e| n.sent_ns > e.at_ns) else { continue };
                let count = late_renewals.entry((n.node, token.as_str())).or_default();
                *count += 1;
                if *count != 2 {
                    continue;
                }
                (token, "had a second renewal answered (at most one can have been in flight)".to_owned(), end.at_ns + 1)
            }
            _ => continue,
        };
        let Some(end) = ends.get(&(n.node, token.as_str())).filter(|e| at > e.at_ns) else { continue };
        judge.violate(|| Violation {
            summary: format!(
                "{} {what} under token {token} {} ms after it {}: an acquisition that ended must not act",
                n.node,
                ms_between(end.at_ns, at),
                end.what
            ),
            evidence: vec![
                node_evidence("end of the acquisition", n, token, end.what.clone(), end.at_ns),
                node_evidence("act after the end", n, token, what, at),
            ],
            faults_active: faults.active_at(end.at_ns),
            at_ns: at,
        });
    }
    let na = ends.is_empty().then_some("no acquisition ended (no loss reported, no release)");
    judge.result("no node acted under an acquisition after reporting it lost or releasing it", na)
}

/// Every acquisition ends (a release or a reported loss) before the same incarnation begins its
/// next acquire, acquires again, or says `stopped`. An incarnation that vanished (crashed, killed)
/// ends its acquisitions with it and is not judged at its end.
pub(super) fn acquisitions_end(nodes: &[NodeLine], ends: &Ends, faults: &Faults) -> PropertyResult {
    let mut judge = Judge::new("acquisitions_end");
    let mut by_incarnation: BTreeMap<(&str, u64), Vec<&NodeLine>> = BTreeMap::new();
    for n in nodes {
        by_incarnation.entry((n.node, n.incarnation)).or_default().push(n);
    }
    let mut acquisitions = 0u64;
    for lines in by_incarnation.values_mut() {
        lines.sort_by_key(|n| n.sent_ns); // stable: equal stamps keep the node's own order
                                          // The acquisition this incarnation holds and has not ended: (token, acquired at).
        let mut open: Option<(&str, u64)> = None;
        for n in lines.iter().copied() {
            if let Some((token, since)) = open {
                if ends.get(&(n.node, token)).is_some_and(|e| e.at_ns <= n.sent_ns) {
                    open = None;
                } else if let Some(next) = begins(n.kind) {
                    judge.violate(|| open_violation(n, token, since, next, faults));
                    open = None;
                }
            }
            if let EventKind::Acquired { token, .. } = n.kind {
                acquisitions += 1;
                open = Some((token.as_str(), n.sent_ns));
            }
        }
    }
    let na = (acquisitions == 0).then_some("no node acquired the lease");
    judge.result("every acquisition was released or reported lost before its node acquired again or stopped", na)
}

/// What an event begins that an open acquisition must not outlive.
fn begins(kind: &EventKind) -> Option<&'static str> {
    match kind {
        EventKind::AcquireAttempt => Some("began a new acquire"),
        EventKind::Acquired { .. } => Some("acquired again"),
        EventKind::Stopped => Some("stopped"),
        _ => None,
    }
}

fn open_violation(n: &NodeLine, token: &str, since: u64, next: &str, faults: &Faults) -> Violation {
    Violation {
        summary: format!(
            "{} {next} {} ms after acquiring token {token}, which it had neither released nor reported lost: its lease stays alive until it expires",
            n.node,
            ms_between(since, n.sent_ns)
        ),
        evidence: vec![
            node_evidence("acquisition", n, token, "acquired".into(), since),
            node_evidence("still open at", n, token, next.into(), n.sent_ns),
        ],
        faults_active: faults.active_at(n.sent_ns),
        at_ns: n.sent_ns,
    }
}

/// An acquisition's confirmed sends (the acquire and each renewal), by the node's own clock.
#[derive(Default)]
struct Validity {
    sends_ns: Vec<u64>,
}

impl Validity {
    /// The newest confirmed send at or before `at`.
    fn last_send_before(&self, at: u64) -> Option<u64> {
        self.sends_ns.iter().copied().filter(|s| *s <= at).max()
    }
}

/// Decisions only within validity: a checkpoint passes, a store call is sent and a model call
/// starts only while the node's own deadline holds: the send stamp of the newest confirmed acquire
/// or renewal sent before the decision, plus the ttl (a correct node also takes its drift margin
/// off; judging at the full ttl leaves that margin as slack). Read from the decision stamps of
/// protocol 2; a node that reports none makes the property not applicable.
pub(super) fn within_validity(ttl_ms: Option<u64>, nodes: &[NodeLine], faults: &Faults) -> PropertyResult {
    let mut judge = Judge::new("within_validity");
    let Some(ttl_ms) = ttl_ms.filter(|t| *t > 0) else {
        return judge.result("", Some("the history records no ttl (history version 1)"));
    };
    let ttl_ns = ttl_ms.saturating_mul(1_000_000);
    let mut validity: HashMap<(&str, &str), Validity> = HashMap::new();
    for n in nodes {
        match n.kind {
            EventKind::Acquired { token, sent_ns: Some(s), .. } | EventKind::Renewed { token, sent_ns: Some(s) } => {
                validity.entry((n.node, token.as_str())).or_default().sends_ns.push(*s)
            }
            _ => {}
        }
    }
    let mut judged = 0u64;
    for n in nodes {
        let (token, what, decided) = match n.kind {
            EventKind::CheckpointPassed { token, number, decided_ns: Some(d) } => {
                (token, format!("pass checkpoint {number}"), *d)
            }
            EventKind::StoreCallSent { token, op, call, decided_ns: Some(d), .. } => {
                (token, format!("send store call {call} ({op:?})"), *d)
            }
            EventKind::ModelCall { token, batch, decided_ns: Some(d), .. } => {
                (token, format!("start model call {batch}"), *d)
            }
            _ => continue,
        };
        let Some(v) = validity.get(&(n.node, token.as_str())) else { continue };
        judged += 1;
        let Some(sent) = v.last_send_before(decided) else { continue };
        let deadline = sent.saturating_add(ttl_ns);
        if decided <= deadline {
            continue;
        }
        judge.violate(|| Violation {
            summary: format!(
                "{} decided to {what} under token {token} {} ms past its validity: its newest confirmed acquire or renewal was sent {} ms before the decision, and the ttl is {ttl_ms} ms",
                n.node,
                ms_between(deadline, decided),
                ms_between(sent, decided)
            ),
            evidence: vec![
                node_evidence("newest confirmed send", n, token, "acquire or renewal sent".into(), sent),
                node_evidence("decision past validity", n, token, what, decided),
            ],
            faults_active: faults.active_at(decided),
            at_ns: decided,
        });
    }
    let na = (judged == 0).then_some("no node reported decision and send stamps (protocol 2)");
    judge.result(
        &format!("every decision fell within its acquisition's validity (ttl {ttl_ms} ms from the confirmed send)"),
        na,
    )
}

#[cfg(test)]
mod tests;
