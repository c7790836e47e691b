//! The wire properties: judged from what the proxy saw each node do, whatever the node reports.
//!
//! - `wire_within_validity`: no store write or model call decided after the node's validity on
//!   the wire ended (the send of its last successful acquire or renewal plus the ttl that
//!   command set).
//! - `wire_keeps_renewing`: a holder acts within 2.5 renewal intervals of its last renewal sent,
//!   unless a fault could hold a renewal in flight (hidden renewals included: they are on the wire).
//! - `wire_after_end`: nothing under an acquisition after its release was answered, after Redis
//!   refused one of its renewals (a renewal thread that got the refusal renews no more; the
//!   pipeline stops within one renewal interval of it), or after the node began acquiring another
//!   token (the acquisition it left must have ended: its renewals stop).
//!
//! "Decided after" is the causal reading of `wire.rs`: never a timing window.

use std::collections::HashSet;

use leasequake_reports::history::{FaultEvent, FaultPhase, LinkCut};
use leasequake_reports::wire::{LeaseOp, WireRecord};
use leasequake_reports::{Evidence, PropertyResult, PropertyStatus, Violation};

use super::super::{holds_renewal, Faults, Judge, RENEWAL_LAG_HALVES};
use super::{Acq, Act, NodeWire, View};

fn ms(ns: u64) -> u64 {
    ns / 1_000_000
}

fn wire_evidence(label: &str, node: &str, token: &str, r: &WireRecord, what: String, at_ns: u64) -> Evidence {
    Evidence {
        label: label.into(),
        seq: None,
        node: node.into(),
        token: token.into(),
        fence: 0,
        what: format!("{what} ({} seq {})", r.link, r.seq),
        at_ns,
    }
}

/// The property's result over the nodes judged: not applicable without a witness; inconclusive
/// (when nothing was violated) for the nodes whose records have gaps or could not be read.
pub(super) fn finish(judge: Judge, view: &View, held: &str, skipped: &[String]) -> PropertyResult {
    if let Some(why) = &view.absent {
        return judge.result(held, Some(&format!("not judged from the wire: {why}")));
    }
    if view.nodes.is_empty() {
        return judge.result(held, Some("no node sent anything through its proxy"));
    }
    let mut p = judge.result(held, None);
    if !skipped.is_empty() {
        let why = skipped.join("; ");
        match p.status {
            PropertyStatus::Violated => p.sentence = format!("{} (not judged: {why})", p.sentence),
            _ => {
                p.status = PropertyStatus::Inconclusive;
                p.sentence = format!("not judged for every node: {why}");
            }
        }
    }
    p
}

/// The nodes the wire cannot judge, and why: gaps in their records, lease commands unread.
pub(super) fn unjudged<'v>(view: &'v View) -> (Vec<String>, HashSet<&'v str>) {
    let mut why = Vec::new();
    let mut skip = HashSet::new();
    for gap in &view.gaps {
        let node = gap.split('-').next().unwrap_or_default();
        if let Some((n, _)) = view.nodes.get_key_value(node) {
            skip.insert(*n);
        }
        why.push(format!("witness records missing ({gap})"));
    }
    for (node, n) in &view.nodes {
        if let Some(elsewhere) = n.elsewhere.as_deref().filter(|_| skip.insert(node)) {
            why.push(format!("{node}: {elsewhere}"));
        }
        if n.unread_count > 0 && skip.insert(node) {
            why.push(format!(
                "{node}: {} command(s) the witness could not read, e.g. {}",
                n.unread_count,
                n.unread.join("; ")
            ));
        }
    }
    (why, skip)
}

/// `wire_within_validity`.
pub(crate) fn within_validity(view: &View, faults: &Faults) -> PropertyResult {
    let mut judge = Judge::new("wire_within_validity");
    let (skipped, skip) = unjudged(view);
    for (node, n) in view.nodes.iter().filter(|(node, _)| !skip.contains(*node)) {
        for act in &n.acts {
            let Some(after) = act.decided_after else { continue };
            let until = n.valid_until(act.rec.sent_ns);
            if until.is_some_and(|u| after <= u) {
                continue;
            }
            judge.violate(|| validity_violation(node, n, act, after, until, faults));
        }
    }
    finish(
        judge,
        view,
        "no node wrote to the store or called the model after deciding past its validity on the wire",
        &skipped,
    )
}

fn validity_violation(
    node: &str,
    n: &NodeWire,
    act: &Act,
    after: u64,
    until: Option<u64>,
    faults: &Faults,
) -> Violation {
    let token = act.token.unwrap_or("?");
    let (summary, last) = match until {
        Some(u) => (
            format!(
                "{node} sent {} under token {token} {} ms past its validity on the wire, decided after a reply it read {} ms past it",
                act.what,
                ms(act.rec.sent_ns.saturating_sub(u)),
                ms(after.saturating_sub(u))
            ),
            n.validity.iter().rev().find(|(sent, end)| *sent <= act.rec.sent_ns && *end == u).map(|(s, _)| *s),
        ),
        None => (format!("{node} sent {} under token {token} with no acquisition on the wire before it", act.what), None),
    };
    let mut evidence = vec![wire_evidence("late request", node, token, act.rec, act.what.clone(), act.rec.sent_ns)];
    if let (Some(sent), Some(r)) = (last, last.and_then(|s| n.cmds.iter().find(|c| c.rec.sent_ns == s))) {
        evidence.insert(
            0,
            wire_evidence("last acquire or renewal", node, token, r.rec, "its validity counts from here".into(), sent),
        );
    }
    Violation { summary, evidence, faults_active: faults.active_at(act.rec.sent_ns), at_ns: act.rec.sent_ns }
}

/// The renewal schedule each node is judged by. A node that renews where it reports it runs the
/// recorded interval (the harness asked it to), or its own if its renewals on the wire came
/// further apart. A node whose library renews out of its sight (`renewals: hidden`) runs the
/// library's schedule, which only the wire shows: its own renewals' median gap, else the gap
/// pooled over every such node of the run (one library), else, when no renewal of any was seen,
/// the ttl its acquire set is the whole allowance (a library may renew as late as it likes within
/// it).
pub(crate) struct Schedule<'h> {
    recorded: Option<u64>,
    hidden: &'h HashSet<&'h str>,
    pooled: Option<u64>,
}

fn gaps(n: &NodeWire) -> Vec<u64> {
    let mut gaps: Vec<u64> = n
        .acqs
        .iter()
        .flat_map(|a| {
            let sends: Vec<u64> =
                std::iter::once(a.acquired.sent_ns).chain(a.renewals.iter().map(|r| r.sent_ns)).collect();
            sends.windows(2).map(|w| ms(w[1].saturating_sub(w[0]))).collect::<Vec<_>>()
        })
        .collect();
    gaps.sort_unstable();
    gaps
}

fn median(gaps: &[u64], at_least: usize) -> Option<u64> {
    (gaps.len() >= at_least.max(1)).then(|| gaps[gaps.len() / 2])
}

impl<'h> Schedule<'h> {
    pub(crate) fn new(view: &View, recorded: Option<u64>, hidden: &'h HashSet<&'h str>) -> Self {
        let mut pooled: Vec<u64> =
            view.nodes.iter().filter(|(node, _)| hidden.contains(*node)).flat_map(|(_, n)| gaps(n)).collect();
        pooled.sort_unstable();
        Self { recorded: recorded.filter(|r| *r > 0), hidden, pooled: median(&pooled, 1) }
    }

    /// The interval `node` renews at, and how it was learned (for the sentence).
    fn interval_ms(&self, node: &str, n: &NodeWire) -> Option<(u64, &'static str)> {
        let own = median(&gaps(n), 3);
        if !self.hidden.contains(node) {
            return match (self.recorded, own) {
                (Some(r), Some(o)) => Some((r.max(o), "renewal every")),
                (r, o) => r.or(o).map(|i| (i, "renewal every")),
            };
        }
        if let Some(i) = own.or(self.pooled) {
            return Some((i, "its library renewing every"));
        }
        // No renewal seen: the lag allowed is the ttl itself.
        let ttl = n.acqs.iter().find_map(|a| a.ttl_ms)?;
        Some((
            ttl.saturating_mul(2) / RENEWAL_LAG_HALVES,
            "no renewal of its library seen: at most its ttl, as if every",
        ))
    }
}

/// The acquisition an act was made under: the one its token names, else the latest acquired
/// before it.
fn acq_of<'n, 'a>(n: &'n NodeWire<'a>, act: &Act) -> Option<&'n Acq<'a>> {
    match act.token {
        Some(t) => n.acqs.iter().rev().find(|a| a.token == t),
        None => n.acqs.iter().rev().find(|a| a.acquired.sent_ns <= act.rec.sent_ns),
    }
}

fn ended_by(a: &Acq, at: u64) -> bool {
    a.released.is_some_and(|r| r.sent_ns <= at) || a.refused.and_then(|r| r.reply_ns).is_some_and(|r| r <= at)
}

/// `wire_keeps_renewing`.
pub(crate) fn keeps_renewing(
    view: &View,
    schedule: &Schedule,
    fault_events: &[&FaultEvent],
    faults: &Faults,
) -> PropertyResult {
    let mut judge = Judge::new("wire_keeps_renewing");
    let (skipped, skip) = unjudged(view);
    let reset_only: HashSet<u64> = fault_events
        .iter()
        .filter(|f| f.phase == FaultPhase::Verified && f.redis_link == Some(LinkCut::Reset))
        .map(|f| f.id)
        .collect();
    for (node, n) in view.nodes.iter().filter(|(node, _)| !skip.contains(*node)) {
        let Some((every, how)) = schedule.interval_ms(node, n) else { continue };
        let lag = every.saturating_mul(1_000_000).saturating_mul(RENEWAL_LAG_HALVES) / 2;
        let mut reported: HashSet<&str> = HashSet::new();
        for act in &n.acts {
            let (Some(after), Some(a)) = (act.decided_after, acq_of(n, act)) else { continue };
            let s = act.rec.sent_ns;
            let last = a.renewals.iter().map(|r| r.sent_ns).filter(|t| *t <= s).max().unwrap_or(a.acquired.sent_ns);
            if ended_by(a, s) || after <= last.saturating_add(lag) || reported.contains(a.token.as_str()) {
                continue;
            }
            if holds_renewal(&reset_only, faults, node, last, s) {
                continue;
            }
            reported.insert(&a.token);
            judge.violate(|| Violation {
                summary: format!(
                    "{node} sent {} under token {} {} ms after its last renewal on the wire ({how} {every} ms, at most {} ms behind) with Redis answering: its renewals had stopped",
                    act.what,
                    a.token,
                    ms(s.saturating_sub(last)),
                    ms(lag)
                ),
                evidence: vec![
                    wire_evidence("last renewal sent", node, &a.token, a.renewals.iter().rev().find(|r| r.sent_ns == last).copied().unwrap_or(a.acquired), "renewal or acquire".into(), last),
                    wire_evidence("work without renewals", node, &a.token, act.rec, act.what.clone(), s),
                ],
                faults_active: faults.active_at(s),
                at_ns: s,
            });
        }
    }
    finish(
        judge,
        view,
        "every holder kept renewing on the wire while it worked, or a fault could hold its renewal",
        &skipped,
    )
}

/// `wire_after_end`.
pub(crate) fn after_end(view: &View, schedule: &Schedule, faults: &Faults) -> PropertyResult {
    let mut judge = Judge::new("wire_after_end");
    let (skipped, skip) = unjudged(view);
    for (node, n) in view.nodes.iter().filter(|(node, _)| !skip.contains(*node)) {
        let grace = schedule.interval_ms(node, n).map_or(0, |(i, _)| i).saturating_mul(1_000_000);
        for a in &n.acqs {
            after_release(node, n, a, faults, &mut judge);
            after_refusal(node, n, a, grace, faults, &mut judge);
            after_moving_on(node, n, a, faults, &mut judge);
        }
    }
    finish(
        judge,
        view,
        "no node renewed, wrote or called the model under an acquisition after its release or a refused renewal",
        &skipped,
    )
}

fn after_release(node: &str, n: &NodeWire, a: &Acq, faults: &Faults, judge: &mut Judge) {
    let Some(rel) = a.released else { return };
    // One renewal may have been on its way when the release went out; a second was decided after.
    if let Some(r) = a.renewals.iter().filter(|r| r.sent_ns > rel.sent_ns).nth(1) {
        judge.violate(|| Violation {
            summary: format!(
                "{node} kept renewing token {} after releasing it (a renewal {} ms after the release)",
                a.token,
                ms(r.sent_ns - rel.sent_ns)
            ),
            evidence: vec![
                wire_evidence("release", node, &a.token, rel, "release".into(), rel.sent_ns),
                wire_evidence("renewal after it", node, &a.token, r, "renewal".into(), r.sent_ns),
            ],
            faults_active: faults.active_at(r.sent_ns),
            at_ns: r.sent_ns,
        });
    }
    let Some(answered) = rel.reply_ns else { return };
    let late = n
        .acts
        .iter()
        .find(|act| act.token == Some(a.token.as_str()) && act.decided_after.is_some_and(|d| d >= answered));
    if let Some(act) = late {
        judge.violate(|| Violation {
            summary: format!("{node} sent {} under token {} after its release was answered", act.what, a.token),
            evidence: vec![
                wire_evidence("release answered", node, &a.token, rel, "release".into(), answered),
                wire_evidence("request after it", node, &a.token, act.rec, act.what.clone(), act.rec.sent_ns),
            ],
            faults_active: faults.active_at(act.rec.sent_ns),
            at_ns: act.rec.sent_ns,
        });
    }
}

/// A node that began acquiring another token is done with this one: its renewal thread was
/// stopped. One renewal may have been on its way then; a second was decided after.
fn after_moving_on(node: &str, n: &NodeWire, a: &Acq, faults: &Faults, judge: &mut Judge) {
    let next = n.cmds.iter().find(|c| {
        matches!(c.c.op, LeaseOp::Acquire | LeaseOp::AcquireOrRenew)
            && c.rec.sent_ns > a.acquired.sent_ns
            && c.c.token.as_deref().is_some_and(|t| t != a.token)
    });
    let Some(next) = next else { return };
    let Some(r) = a.renewals.iter().filter(|r| r.sent_ns > next.rec.sent_ns).nth(1) else { return };
    judge.violate(|| Violation {
        summary: format!(
            "{node} kept renewing token {} {} ms after it began acquiring another token ({}): the acquisition it left was never ended",
            a.token,
            ms(r.sent_ns.saturating_sub(next.rec.sent_ns)),
            next.c.token.as_deref().unwrap_or("?")
        ),
        evidence: vec![
            wire_evidence("acquire of another token", node, &a.token, next.rec, "acquire".into(), next.rec.sent_ns),
            wire_evidence("renewal after it", node, &a.token, r, "renewal".into(), r.sent_ns),
        ],
        faults_active: faults.active_at(r.sent_ns),
        at_ns: r.sent_ns,
    });
}

fn after_refusal(node: &str, n: &NodeWire, a: &Acq, grace_ns: u64, faults: &Faults, judge: &mut Judge) {
    let Some((refusal, at)) = a.refused.and_then(|r| Some((r, r.reply_ns?))) else { return };
    let again = a.renewals.iter().find(|r| r.sent_ns > at);
    let late = n.acts.iter().find(|act| {
        act.token == Some(a.token.as_str()) && act.decided_after.is_some_and(|d| d > at.saturating_add(grace_ns))
    });
    let (what, r, when) = match (again, late) {
        (Some(r), _) => ("renewed it again".to_owned(), *r, r.sent_ns),
        (None, Some(act)) => {
            (format!("sent {} under it {} ms later", act.what, ms(act.rec.sent_ns - at)), act.rec, act.rec.sent_ns)
        }
        (None, None) => return,
    };
    judge.violate(|| Violation {
        summary: format!("{node}'s renewal of token {} was refused by Redis, and it {what}", a.token),
        evidence: vec![
            wire_evidence("renewal refused", node, &a.token, refusal, "refused renewal".into(), at),
            wire_evidence("after the refusal", node, &a.token, r, what.clone(), when),
        ],
        faults_active: faults.active_at(when),
        at_ns: when,
    });
}
