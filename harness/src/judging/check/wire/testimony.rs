//! `testimony`: what each node reported agrees with what the proxy saw it do. Every reported
//! acquire, renewal, store call and model call happened on the node's links; no store call went
//! out unreported; and a stamp never claims a send or a decision later than the proxy read the
//! request (a node reads its clock before it sends). A node whose reports are wrong is named, so
//! a bug in its instrumentation cannot hide a bug in its lease.

use std::collections::{BTreeSet, HashSet};

use leasequake_reports::history::EventKind;
use leasequake_reports::wire::WireRecord;
use leasequake_reports::{Evidence, PropertyResult, Violation};

use super::super::{Faults, Judge, NodeLine};
use super::{Act, NodeWire, View};

fn said(n: &NodeLine, what: String) -> Evidence {
    Evidence {
        label: "reported".into(),
        seq: None,
        node: n.node.into(),
        token: String::new(),
        fence: 0,
        what,
        at_ns: n.sent_ns,
    }
}

fn seen(r: &WireRecord, what: &str) -> Evidence {
    Evidence {
        label: "on the wire".into(),
        seq: None,
        node: r.node().into(),
        token: String::new(),
        fence: 0,
        what: format!("{what} ({} seq {})", r.link, r.seq),
        at_ns: r.sent_ns,
    }
}

/// `testimony`.
/// A node that sent lines the harness refused (`garbled`) is not judged: what it reported is not
/// all in the history, so a call it reported in a refused line would read as one it hid.
pub(crate) fn testimony(
    view: &View,
    (nodes, garbled): (&[NodeLine], &BTreeSet<&str>),
    faults: &Faults,
) -> PropertyResult {
    let mut judge = Judge::new("testimony");
    let (mut skipped, mut skip) = super::properties::unjudged(view);
    for node in garbled.iter().filter(|n| view.nodes.contains_key(**n)) {
        if skip.insert(node) {
            skipped.push(format!("{node} sent lines that are not protocol events: its reports are not all here"));
        }
    }
    let mut reported_calls: HashSet<(&str, &str, u64)> = HashSet::new();
    // The store calls each node says the store answered: those must have gone out. A call
    // reported sent and then held (a sync point the run ended at) or lost may never have left.
    let answered: HashSet<(&str, &str, u64)> = nodes
        .iter()
        .filter_map(|n| match n.kind {
            EventKind::StoreCallAcked { token, call } | EventKind::StoreCallRejected { token, call, .. } => {
                Some((n.node, token.as_str(), *call))
            }
            _ => None,
        })
        .collect();
    let mut matched_renewals: HashSet<(&str, u64)> = HashSet::new();
    for n in nodes.iter().filter(|n| !skip.contains(n.node)) {
        let Some(w) = view.nodes.get(n.node) else { continue };
        let problem = match n.kind {
            EventKind::Acquired { token, sent_ns, .. } => acquired(w, token, *sent_ns),
            EventKind::Renewed { token, sent_ns } => renewed(w, n, token, *sent_ns, &mut matched_renewals),
            EventKind::StoreCallSent { token, call, decided_ns, .. } => {
                reported_calls.insert((n.node, token.as_str(), *call));
                let answered = answered.contains(&(n.node, token.as_str(), *call));
                store_call(w, token, (*call, answered), *decided_ns)
            }
            EventKind::ModelCall { token, batch, decided_ns, .. } => {
                model_call(w, token, u64::from(*batch), *decided_ns)
            }
            _ => None,
        };
        if let Some((what, rec)) = problem {
            judge.violate(|| Violation {
                summary: format!("{} {what}", n.node),
                evidence: std::iter::once(said(n, format!("{:?}", n.kind).chars().take(160).collect()))
                    .chain(rec.map(|r| seen(r, "the request")))
                    .collect(),
                faults_active: faults.active_at(n.sent_ns),
                at_ns: n.sent_ns,
            });
        }
    }
    unreported(view, &skip, &reported_calls, faults, &mut judge);
    super::properties::finish(judge, view, "every node's reports agree with what its links carried", &skipped)
}

type Problem<'a> = Option<(String, Option<&'a WireRecord>)>;

fn acquired<'a>(w: &NodeWire<'a>, token: &str, sent_ns: Option<u64>) -> Problem<'a> {
    let Some(a) = w.acqs.iter().find(|a| a.token == token) else {
        return Some((
            format!("reported acquiring token {token}; its Redis link shows no acquire of it that took effect"),
            None,
        ));
    };
    let late = sent_ns.filter(|s| *s > a.acquired.sent_ns)?;
    Some((
        format!(
            "stamped its acquire of {token} as sent {} µs after the proxy had read it",
            (late - a.acquired.sent_ns) / 1000
        ),
        Some(a.acquired),
    ))
}

fn renewed<'a>(
    w: &NodeWire<'a>,
    n: &NodeLine,
    token: &str,
    sent_ns: Option<u64>,
    matched: &mut HashSet<(&'a str, u64)>,
) -> Problem<'a> {
    let Some(a) = w.acqs.iter().find(|a| a.token == token) else {
        return Some((format!("reported renewing token {token}, which it never acquired on the wire"), None));
    };
    // The renewal it reports was answered before it reported it, and sent no earlier than its stamp says.
    let found = a.renewed.iter().find(|r| {
        !matched.contains(&(r.link.as_str(), r.seq))
            && r.reply_ns.is_some_and(|at| at <= n.sent_ns.max(n.at_ns))
            && sent_ns.is_none_or(|s| s <= r.sent_ns)
    });
    match found {
        Some(r) => {
            matched.insert((r.link.as_str(), r.seq));
            None
        }
        None => Some((
            format!(
                "reported a renewal of token {token}{} that no renewal answered on its Redis link before the report",
                sent_ns.map_or(String::new(), |s| format!(" sent at {s}"))
            ),
            None,
        )),
    }
}

fn store_call<'a>(
    w: &NodeWire<'a>,
    token: &str,
    (call, answered): (u64, bool),
    decided_ns: Option<u64>,
) -> Problem<'a> {
    let is_store = |a: &&Act| a.rec.link_kind() == "store" && a.token == Some(token) && a.call == Some(call);
    match w.acts.iter().find(is_store) {
        Some(a) => {
            let late = decided_ns.filter(|d| *d > a.rec.sent_ns)?;
            let what = format!(
                "stamped its decision to send store call {call} {} µs after the proxy read it",
                (late - a.rec.sent_ns) / 1000
            );
            Some((what, Some(a.rec)))
        }
        None if answered => Some((
            format!(
                "reported the store's answer to store call {call} under token {token}; its store link never carried it"
            ),
            None,
        )),
        None => None,
    }
}

fn model_call<'a>(w: &NodeWire<'a>, token: &str, batch: u64, decided_ns: Option<u64>) -> Problem<'a> {
    let model: Vec<&Act> = w.acts.iter().filter(|a| a.rec.link_kind() == "model").collect();
    if model.is_empty() {
        return None; // the node makes its model calls itself (protocol 1 to 3)
    }
    match model.iter().find(|a| a.token == Some(token) && a.batch == Some(batch)) {
        Some(a) => {
            let late = decided_ns.filter(|d| *d > a.rec.sent_ns)?;
            Some((
                format!(
                    "stamped its decision to call the model {} µs after the proxy read the call",
                    (late - a.rec.sent_ns) / 1000
                ),
                Some(a.rec),
            ))
        }
        None => {
            Some((format!("reported model call {batch} under token {token}; its model link never carried it"), None))
        }
    }
}

/// Store calls on the wire that their node never reported.
fn unreported(
    view: &View,
    skip: &HashSet<&str>,
    reported: &HashSet<(&str, &str, u64)>,
    faults: &Faults,
    judge: &mut Judge,
) {
    for (node, w) in view.nodes.iter().filter(|(node, _)| !skip.contains(*node)) {
        let silent = w.acts.iter().find(|a| {
            a.rec.link_kind() == "store"
                && matches!((a.token, a.call), (Some(t), Some(c)) if !reported.contains(&(*node, t, c)))
        });
        if let Some(a) = silent {
            judge.violate(|| Violation {
                summary: format!("{node} sent {} (call {}) without reporting it", a.what, a.call.unwrap_or(0)),
                evidence: vec![seen(a.rec, &a.what)],
                faults_active: faults.active_at(a.rec.sent_ns),
                at_ns: a.rec.sent_ns,
            });
        }
    }
}
