//! What the nodes did, read from the proxy's witness records (history version 7) rather than from
//! what they reported: each node's lease commands on its Redis link (acquire, renew, release,
//! check, read by `reports::wire::classify`), its store and model requests, each stamped by the
//! proxy. The wire properties (`wire_*`, in `wire/properties.rs`) and the check of the node's
//! own reports against the wire (`testimony`) read this view, for every node whatever protocol
//! version it speaks.
//!
//! Causality, not a timing window: a node that sent request R after a reply on its pipeline was
//! delivered to it, with none of its pipeline's requests outstanding, decided R after reading that
//! reply (a pipeline runs one exchange at a time: a check, a store call, a model call, a
//! release). The proxy stamps a request when it reads it (after the node sent it) and a reply
//! once written back (before the node can read it), so "decided after" holds whatever the load.
//! A node whose pipeline runs exchanges side by side is judged only where they do not overlap.

use std::collections::BTreeMap;

use leasequake_reports::history::{fence_key, lease_key, EventKind, Header, Snapshot};
use leasequake_reports::printable;
use leasequake_reports::wire::{classify, Classified, LeaseOp, Scripts, WireRecord, WireRequest};

use super::NodeLine;

mod properties;
mod testimony;

pub(super) use properties::{after_end, keeps_renewing, within_validity, Schedule};
pub(super) use testimony::testimony;

/// The wire as the checker reads it, per node.
pub(super) struct View<'a> {
    /// Why no wire property is judged (no witness), if so.
    pub absent: Option<String>,
    pub nodes: BTreeMap<&'a str, NodeWire<'a>>,
    /// Nodes whose records are not all in the history (`snapshot.witness_gaps`).
    pub gaps: Vec<String>,
}

/// One node's wire.
#[derive(Default)]
pub(super) struct NodeWire<'a> {
    /// Its lease commands, in send order.
    pub cmds: Vec<Cmd<'a>>,
    /// Its store writes and model calls, in send order, each with the reply it was decided after.
    pub acts: Vec<Act<'a>>,
    /// Its acquisitions, as the wire shows them.
    pub acqs: Vec<Acq<'a>>,
    /// Validity points: (a successful acquire's or renewal's send, that send plus its ttl), in
    /// send order, and the running maximum of the second.
    pub validity: Vec<(u64, u64)>,
    validity_max: Vec<u64>,
    /// Lease commands (or bytes) the witness could not read, with why (the first few).
    pub unread: Vec<String>,
    pub unread_count: u64,
    /// Its Redis commands on other keys than the lease key and the fence counter.
    other: Vec<&'a WireRecord>,
    /// Where the wire shows this node keeping its lease instead, when not under the lease key:
    /// a token its acts carry, set on another key. The witness follows one key, so this node's
    /// lease is not judged from the wire (not failed: its acquisitions are not missing).
    pub elsewhere: Option<String>,
}

/// A lease command and what it did.
pub(super) struct Cmd<'a> {
    pub rec: &'a WireRecord,
    pub c: Classified,
}

/// A store write or a model call.
pub(super) struct Act<'a> {
    pub rec: &'a WireRecord,
    /// The token its body carried.
    pub token: Option<&'a str>,
    /// `store POST /v1/upsert` ...
    pub what: String,
    /// The body's call id (store calls) and batch (model calls).
    pub call: Option<u64>,
    pub batch: Option<u64>,
    /// The latest pipeline reply delivered before it was sent, when none of the node's pipeline
    /// requests was outstanding then: the node decided it after that moment.
    pub decided_after: Option<u64>,
}

/// An acquisition on the wire: a successful acquire of a token and what followed under it.
pub(super) struct Acq<'a> {
    pub token: String,
    pub acquired: &'a WireRecord,
    pub ttl_ms: Option<u64>,
    /// Every renewal sent under it (any outcome).
    pub renewals: Vec<&'a WireRecord>,
    /// The renewals that took effect (or may have: an unread reply).
    pub renewed: Vec<&'a WireRecord>,
    /// Its release: the request and when its answer was delivered.
    pub released: Option<&'a WireRecord>,
    /// A renewal Redis refused (the key another's or gone), delivered to the node.
    pub refused: Option<&'a WireRecord>,
}

const UNREAD_KEPT: usize = 3;

/// Reads the witness records of a history.
pub(super) fn read<'a>(
    header: Option<&Header>,
    snapshot: Option<&Snapshot>,
    nodes: &[NodeLine<'a>],
    wire: &[&'a WireRecord],
) -> View<'a> {
    let absent = match header {
        None => Some("the history has no header".to_owned()),
        Some(h) if !h.witness => Some(if h.version < 7 {
            format!("history version {} records no witness (version 7 does)", h.version)
        } else {
            "the fault proxy witnessed nothing: it is not leasequake's (the official Toxiproxy has no witness)"
                .to_owned()
        }),
        Some(_) => None,
    };
    if absent.is_some() {
        return View { absent, nodes: BTreeMap::new(), gaps: Vec::new() };
    }
    let tenant = header.map_or("", |h| h.tenant.as_str());
    let lease = declared_key(nodes).unwrap_or_else(|| lease_key(tenant));
    let fence = fence_key(tenant);
    let scripts = Scripts::learn(wire.iter().copied());
    let mut out: BTreeMap<&str, NodeWire> = BTreeMap::new();
    for r in wire {
        let n = out.entry(r.node()).or_default();
        n.add(r, (&lease, &fence), &scripts);
    }
    for n in out.values_mut() {
        n.settle();
        n.elsewhere = n.lease_elsewhere(&lease);
    }
    let gaps = snapshot.map(|s| s.witness_gaps.clone()).unwrap_or_default();
    View { absent, nodes: out, gaps }
}

/// The lease key the nodes declared in `hello` (protocol 3), if any did.
fn declared_key(nodes: &[NodeLine]) -> Option<String> {
    nodes.iter().find_map(|n| match n.kind {
        EventKind::Hello { lease_key: Some(k), .. } => Some(k.clone()),
        _ => None,
    })
}

impl<'a> NodeWire<'a> {
    fn add(&mut self, r: &'a WireRecord, (lease, fence): (&str, &str), scripts: &Scripts) {
        match &r.request {
            WireRequest::Unreadable { why } => self.note_unread(r, why),
            WireRequest::Redis { .. } => match classify(r, lease, fence, scripts) {
                Some(c) => {
                    if let Some(why) = c.unread.as_deref().filter(|_| c.op == LeaseOp::Unknown) {
                        self.note_unread(r, why);
                    }
                    self.cmds.push(Cmd { rec: r, c });
                }
                None => self.other.push(r),
            },
            WireRequest::Http { method, path, token, call, batch, .. } if method == "POST" => {
                let what = format!("{} POST {}", r.link_kind(), printable(path));
                let (call, batch) = (*call, *batch);
                self.acts.push(Act { rec: r, token: token.as_deref(), what, call, batch, decided_after: None });
            }
            WireRequest::Http { .. } => {}
        }
    }

    fn note_unread(&mut self, r: &WireRecord, why: &str) {
        self.unread_count += 1;
        if self.unread.len() < UNREAD_KEPT {
            self.unread.push(format!("{} seq {}: {}", r.link, r.seq, printable(why)));
        }
    }

    /// Orders what was read and derives the acquisitions, the validity and the acts' decisions.
    fn settle(&mut self) {
        self.cmds.sort_by_key(|c| (c.rec.sent_ns, c.rec.seq));
        self.acts.sort_by_key(|a| (a.rec.sent_ns, a.rec.seq));
        self.acquisitions();
        self.validity.sort_unstable();
        self.validity_max = self
            .validity
            .iter()
            .scan(0, |m, (_, u)| {
                *m = (*m).max(*u);
                Some(*m)
            })
            .collect();
        self.decisions();
    }

    /// A token this node's acts carry that no acquisition of the lease key gave it, and the other
    /// key the wire shows it set on (first seen): the node keeps its lease where the witness does
    /// not follow it. A token set nowhere stays the node's to answer for (an act without a lease).
    fn lease_elsewhere(&self, lease: &str) -> Option<String> {
        let acquired = |t: &str| self.acqs.iter().any(|a| a.token == t);
        let token = self.acts.iter().filter_map(|a| a.token).find(|t| !t.is_empty() && !acquired(t))?;
        let set = self.other.iter().find(|r| match &r.request {
            WireRequest::Redis { args } => args.iter().skip(2).any(|a| a == token),
            _ => false,
        })?;
        let WireRequest::Redis { args } = &set.request else { return None };
        let key = args.get(1).map_or("", String::as_str);
        Some(format!(
            "its token {} is set on key {} ({} seq {}), not on the lease key {}: a lease kept under another key \
             is declared in `hello` (lease_key, protocol 3; docs/node-protocol.md)",
            printable(token),
            printable(key),
            set.link,
            set.seq,
            printable(lease)
        ))
    }

    /// The acquisitions and the validity points, walking the lease commands in send order.
    fn acquisitions(&mut self) {
        for cmd in &self.cmds {
            let (c, r) = (&cmd.c, cmd.rec);
            let open = self.acqs.last_mut().filter(|a| a.released.is_none() && a.refused.is_none());
            let renews_open = open.as_ref().is_some_and(|a| c.token.as_deref().is_none_or(|t| t == a.token));
            let op = match c.op {
                LeaseOp::AcquireOrRenew if renews_open => LeaseOp::Renew,
                LeaseOp::AcquireOrRenew => LeaseOp::Acquire,
                op => op,
            };
            match op {
                LeaseOp::Acquire if c.outcome.maybe_done() => {
                    let Some(token) = c.token.clone() else { continue };
                    self.validity.push((r.sent_ns, until(r.sent_ns, c.ttl_ms)));
                    self.acqs.push(Acq {
                        token,
                        acquired: r,
                        ttl_ms: c.ttl_ms,
                        renewals: vec![],
                        renewed: vec![],
                        released: None,
                        refused: None,
                    });
                }
                LeaseOp::Renew => {
                    let Some(a) = acq_for(&mut self.acqs, c.token.as_deref()) else { continue };
                    a.renewals.push(r);
                    if a.refused.is_none()
                        && r.reply_ns.is_some()
                        && c.outcome == leasequake_reports::wire::Outcome::Refused
                    {
                        a.refused = Some(r);
                    }
                    if c.outcome.maybe_done() {
                        a.renewed.push(r);
                        let ttl = c.ttl_ms.or_else(|| a.ttl_ms.filter(|t| passes(r, *t)));
                        self.validity.push((r.sent_ns, until(r.sent_ns, ttl)));
                    }
                }
                LeaseOp::Release => {
                    if let Some(a) = acq_for(&mut self.acqs, c.token.as_deref()) {
                        a.released.get_or_insert(r);
                    }
                }
                _ => {}
            }
        }
    }

    /// For each act, the latest pipeline reply delivered before it with nothing outstanding. The
    /// pipeline: checks of the key, releases, store and model requests (not renewals, which run
    /// beside it).
    fn decisions(&mut self) {
        // (time, 0 for a reply or 1 for a send, the act's index for an act's send)
        let mut events: Vec<(u64, u8, Option<usize>)> = Vec::new();
        let pipeline =
            self.cmds.iter().filter(|c| matches!(c.c.op, LeaseOp::Check | LeaseOp::Release)).map(|c| (c.rec, None));
        for (rec, act) in pipeline.chain(self.acts.iter().enumerate().map(|(i, a)| (a.rec, Some(i)))) {
            events.push((rec.sent_ns, 1, act));
            if let Some(reply) = rec.reply_ns {
                events.push((reply, 0, None));
            }
        }
        events.sort_unstable();
        let (mut outstanding, mut last) = (0u64, None::<u64>);
        for (at, kind, act) in events {
            if kind == 0 {
                outstanding = outstanding.saturating_sub(1);
                last = last.max(Some(at));
                continue;
            }
            if let Some(i) = act {
                self.acts[i].decided_after = if outstanding == 0 { last } else { None };
            }
            outstanding += 1;
        }
    }

    /// The node's validity at `t` by the wire: the latest `send + ttl` of its successful acquires
    /// and renewals sent at or before `t` (`None`: it had acquired nothing by then).
    pub fn valid_until(&self, t: u64) -> Option<u64> {
        let n = self.validity.partition_point(|(sent, _)| *sent <= t);
        n.checked_sub(1).map(|i| self.validity_max[i])
    }
}

/// The acquisition a command names by its token, else the latest.
fn acq_for<'x, 'a>(acqs: &'x mut [Acq<'a>], token: Option<&str>) -> Option<&'x mut Acq<'a>> {
    match token {
        Some(t) => acqs.iter_mut().rev().find(|a| a.token == t),
        None => acqs.last_mut(),
    }
}

/// `sent + ttl` in ns; an unread ttl never ends (the reading that cannot invent a violation).
fn until(sent_ns: u64, ttl_ms: Option<u64>) -> u64 {
    ttl_ms.map_or(u64::MAX, |ttl| sent_ns.saturating_add(ttl.saturating_mul(1_000_000)))
}

/// Whether a renewal whose own expiry could not be read passes the acquisition's ttl among its
/// arguments (a library's extend script with the ttl in a local): then that is its expiry.
fn passes(r: &WireRecord, ttl_ms: u64) -> bool {
    let WireRequest::Redis { args } = &r.request else { return false };
    let want = ttl_ms.to_string();
    args.iter().skip(3).any(|a| *a == want)
}

#[cfg(test)]
mod tests;
