//! What a run cost and what it showed: when each acquisition was truly lost, the work done after
//! (the waste `bounded_waste` judges), fencing rejections, writes that landed under another
//! owner, and how long each fault took to be seen in effect.

use std::collections::HashMap;

use leasequake_reports::history::{
    AuditRecord, EventKind, FaultEvent, FaultKind, FaultPhase, ModelRecord, ObserverSample,
};
use leasequake_reports::Metrics;

use super::{NodeLine, Waste};

/// What was spent after truly losing ownership, fencing rejections, writes under another owner,
/// and fault effect times.
pub(super) fn measure<'a>(
    (audit, model): (&[&AuditRecord], &[&'a ModelRecord]),
    nodes: &[NodeLine<'a>],
    faults: &[&FaultEvent],
    observer: &[&'a ObserverSample],
    ttl_ms: Option<u64>,
) -> (Metrics, Vec<Waste<'a>>) {
    let mut own = Ownership::new(nodes, observer, ttl_ms);
    own.excuse_split_brain(&failover_windows(faults), observer);
    let mut m = Metrics::default();
    let wastes = node_counts(&mut m, (nodes, model), &own.loss_at);
    m.fenced_rejections = audit
        .iter()
        .filter(|a| {
            !a.accepted
                && a.reason.as_deref().is_some_and(|r| r.starts_with("stale fence") || r.starts_with("fence anomaly"))
        })
        .count() as u64;
    m.landed_while_another_owned = own.landed_while_another_owned(audit);
    m.fault_effect_ms = fault_effects(faults);
    (m, wastes)
}

/// The acquisitions in Redis's order and when each was truly lost: its own report, a successor's
/// acquire, or the observer seeing another holder on the primary, whichever came first. A node's
/// own acts (reports, acquires, calls) are placed by the node's stamps, not by when its lines
/// reached the harness: under load a node's lines arrive hundreds of ms late, and not equally late
/// for every node (330 ms seen in a soak at load 18), so receipt stamps can put a node's last call
/// after a successor's acquire it preceded. Lines without a node stamp keep their receipt.
struct Ownership<'a> {
    /// (reported at, token, fence), in acquisition order.
    acquired: Vec<(u64, &'a str, u64)>,
    /// When each acquisition's acquire was sent (its node's stamp).
    acquired_sent: HashMap<&'a str, u64>,
    /// Each token's place in `acquired` (not report times: two reports can race).
    rank: HashMap<&'a str, usize>,
    /// When each acquisition was truly lost.
    loss_at: HashMap<&'a str, u64>,
    /// When a newer acquisition (another token) was first reported after each one.
    superseded_at: HashMap<&'a str, u64>,
    /// When each acquisition's node itself reported losing it.
    reported_lost: HashMap<&'a str, u64>,
    /// The primary's samples, in time order.
    masters: Vec<&'a ObserverSample>,
    ttl_ms: Option<u64>,
}

impl<'a> Ownership<'a> {
    fn new(nodes: &[NodeLine<'a>], observer: &[&'a ObserverSample], ttl_ms: Option<u64>) -> Self {
        let mut acquired: Vec<(u64, &str, u64)> = Vec::new();
        let mut acquired_sent: HashMap<&str, u64> = HashMap::new();
        let mut reported_lost: HashMap<&str, u64> = HashMap::new();
        for n in nodes {
            match n.kind {
                EventKind::Acquired { token, fence, .. } => {
                    acquired.push((n.at_ns, token, *fence));
                    acquired_sent.insert(token, n.sent_ns);
                }
                EventKind::OwnershipLost { token, .. } => earliest(&mut reported_lost, token, n.sent_ns),
                _ => {}
            }
        }
        let mut loss_at = reported_lost.clone();
        acquired.sort_unstable();
        put_racing_acquisitions_in_redis_order(&mut acquired);
        let rank = acquired.iter().enumerate().map(|(i, (_, t, _))| (*t, i)).collect();
        let mut superseded_at: HashMap<&str, u64> = HashMap::new();
        for pair in acquired.windows(2) {
            let ((old_at, old, _), (at, new, _)) = (pair[0], pair[1]);
            superseded_at.insert(old, at.max(old_at));
            let sent = |t: &str, or: u64| acquired_sent.get(t).copied().unwrap_or(or);
            earliest(&mut loss_at, old, sent(new, at).max(sent(old, old_at)));
        }
        let mut masters: Vec<&ObserverSample> =
            observer.iter().copied().filter(|o| o.role.as_deref() == Some("master")).collect();
        masters.sort_by_key(|o| o.at_ns);
        let mut own = Self { acquired, acquired_sent, rank, loss_at, superseded_at, reported_lost, masters, ttl_ms };
        own.observer_losses();
        own
    }

    /// The observer's evidence of loss: the key held by another token acquired after this one (an
    /// absent key says nothing: a sample is slower than a release, and the key may be re-taken).
    /// Acquisition windows are consecutive and disjoint: one pointer walks the samples once.
    fn observer_losses(&mut self) {
        let mut j = 0;
        let mut found = Vec::new();
        for (i, (at, token, _)) in self.acquired.iter().enumerate() {
            let until = self.acquired.get(i + 1).map_or(u64::MAX, |n| n.0);
            while j < self.masters.len() && self.masters[j].at_ns <= *at {
                j += 1;
            }
            let seen = self.masters[j..].iter().take_while(|o| o.at_ns < until).find(|o| self.newer_holder(o, token));
            if let Some(o) = seen {
                found.push((*token, o.at_ns));
            }
        }
        for (token, at) in found {
            earliest(&mut self.loss_at, token, at);
        }
    }

    /// A successor that acquired during a failover (the primary cut from its replica, then
    /// replaced) could do so because the holder's key, or its renewals, lived only on the cut-off
    /// primary: a split brain the environment made, which no lease sees without fencing. Such a
    /// holder cannot know it lost before its key runs out where it wrote it (the latest expiry
    /// the observer saw for its token), so its loss counts from there, unless it said so earlier.
    /// A lease that works past its own key's expiry is still judged from that expiry.
    fn excuse_split_brain(&mut self, failovers: &[(u64, u64)], observer: &[&ObserverSample]) {
        let during_failover = |t: u64| failovers.iter().any(|(from, to)| (*from..=*to).contains(&t));
        let split: Vec<&str> =
            self.acquired.windows(2).filter(|pair| during_failover(pair[1].0)).map(|pair| pair[0].1).collect();
        for token in split {
            let expiry = observer
                .iter()
                .filter(|o| o.error.is_none() && o.holder.as_deref() == Some(token))
                .filter_map(|o| Some(o.at_ns.saturating_add(u64::try_from(o.ttl_ms?).ok()?.saturating_mul(1_000_000))))
                .max();
            let (Some(expiry), Some(lost)) = (expiry, self.loss_at.get(token).copied()) else { continue };
            let knew = self.reported_lost.get(token).copied().unwrap_or(u64::MAX);
            self.loss_at.insert(token, lost.max(expiry.min(knew)));
        }
    }

    /// Whether sample `o` shows the key held by an acquisition newer than `token`'s.
    fn newer_holder(&self, o: &ObserverSample, token: &str) -> bool {
        let mine = self.rank.get(token).copied().unwrap_or(0);
        o.error.is_none()
            && o.holder.as_deref().is_some_and(|h| {
                h != token && self.rank.get(h).map_or_else(|| self.written_after(o, token), |r| *r > mine)
            })
    }

    /// A holder no node reported acquiring is newer only if its key can have been written after
    /// `token`'s acquisition was sent: a key written with the ttl at w shows ttl - (GET - w) left,
    /// and the GET ran before the sample's stamp, so w <= stamp - (ttl - left). (Seen in a soak: a
    /// sample whose GET ran just before n1 re-acquired showed n1's own earlier, ambiguous acquire,
    /// and n1's whole next round counted as waste.)
    fn written_after(&self, o: &ObserverSample, token: &str) -> bool {
        let (Some(ttl), Some(left), Some(sent)) = (self.ttl_ms, o.ttl_ms, self.acquired_sent.get(token)) else {
            return true;
        };
        let aged_ms = ttl.saturating_sub(u64::try_from(left).unwrap_or(0));
        o.at_ns.saturating_sub(aged_ms.saturating_mul(1_000_000)) > *sent
    }

    /// Accepted writes that landed while another owned: after a newer acquisition was reported,
    /// or when the latest primary sample before it shows a newer token holding the key.
    fn landed_while_another_owned(&self, audit: &[&AuditRecord]) -> u64 {
        let mut i = 0;
        let mut current: Option<&ObserverSample> = None;
        let mut landed = 0;
        for a in audit.iter().filter(|a| a.accepted && a.op.is_write()) {
            while i < self.masters.len() && self.masters[i].at_ns <= a.mono_ns {
                current = Some(self.masters[i]);
                i += 1;
            }
            let superseded = self.superseded_at.get(a.token.as_str()).is_some_and(|t| *t < a.mono_ns);
            if superseded || current.is_some_and(|o| self.newer_holder(o, &a.token)) {
                landed += 1;
            }
        }
        landed
    }
}

/// Keeps the latest action seen under `token`.
fn latest<'a>(map: &mut HashMap<&'a str, (u64, &'a str)>, token: &'a str, action: (u64, &'a str)) {
    map.entry(token).and_modify(|a| *a = (*a).max(action)).or_insert(action);
}

/// Keeps the earliest time seen for `token`.
fn earliest<'a>(map: &mut HashMap<&'a str, u64>, token: &'a str, at: u64) {
    map.entry(token).and_modify(|t| *t = (*t).min(at)).or_insert(at);
}

/// Each node's syncs and aborts, the model and store calls it sent after losing their
/// acquisition, and the work from each loss to the last action under it. A node's model calls
/// are the model service's records when it calls the service (they arrived there, whatever the
/// node reports), else its `model_call` reports.
fn node_counts<'a>(
    m: &mut Metrics,
    (nodes, model): (&[NodeLine<'a>], &[&'a ModelRecord]),
    loss_at: &HashMap<&'a str, u64>,
) -> Vec<Waste<'a>> {
    let mut last_action: HashMap<&str, (u64, &str)> = HashMap::new();
    let after_loss = |token: &str, n: &NodeLine| loss_at.get(token).is_some_and(|l| n.sent_ns > *l);
    let served: std::collections::HashSet<&str> = model.iter().map(|r| r.node.as_str()).collect();
    for r in model {
        let Some(lost) = loss_at.get(r.token.as_str()) else { continue };
        if r.arrived_ns > *lost {
            m.nodes.entry(r.node.clone()).or_default().wasted_model_calls += 1;
            latest(&mut last_action, &r.token, (r.arrived_ns, &r.node));
        }
        // A call in flight at the loss that the node let run to its answer was worked on after
        // the loss until it answered (as a node's own `model_call` report, sent when the call
        // returns, says).
        if let Some(done) = r.finished_ns.filter(|f| f > lost) {
            latest(&mut last_action, &r.token, (done, &r.node));
        }
    }
    for n in nodes {
        let nm = m.nodes.entry(n.node.to_owned()).or_default();
        match n.kind {
            EventKind::SyncFinished { .. } => nm.syncs += 1,
            EventKind::RoundAborted { lost: true, .. } => nm.lost_rounds += 1,
            EventKind::RoundAborted { lost: false, .. } => nm.other_aborts += 1,
            EventKind::ModelCall { token, .. } if after_loss(token, n) && !served.contains(n.node) => {
                nm.wasted_model_calls += 1;
                latest(&mut last_action, token, (n.sent_ns, n.node));
            }
            EventKind::StoreCallSent { token, .. } if after_loss(token, n) => {
                nm.wasted_store_calls += 1;
                latest(&mut last_action, token, (n.sent_ns, n.node));
            }
            _ => {}
        }
    }
    let mut wastes = Vec::new();
    for (token, (at, node)) in last_action {
        let lost_ns = loss_at[token];
        let wasted = (at - lost_ns) / 1_000_000;
        let nm = m.nodes.entry(node.to_owned()).or_default();
        nm.wasted_ms += wasted;
        nm.loss_to_last_action_ms_max = nm.loss_to_last_action_ms_max.max(wasted);
        wastes.push(Waste { node, token, lost_ns, last_ns: at });
    }
    wastes.sort_by_key(|w| w.last_ns);
    wastes
}

/// When each failover was in force: from its request until it healed (or the run's end; a
/// failover that failed to apply was never in force).
fn failover_windows(faults: &[&FaultEvent]) -> Vec<(u64, u64)> {
    let mut open: HashMap<u64, u64> = HashMap::new();
    let mut out = Vec::new();
    for f in faults.iter().filter(|f| f.fault == FaultKind::Failover) {
        match f.phase {
            FaultPhase::Requested => {
                open.insert(f.id, f.at_ns);
            }
            FaultPhase::Healed => {
                if let Some(from) = open.remove(&f.id) {
                    out.push((from, f.at_ns));
                }
            }
            FaultPhase::Failed => {
                open.remove(&f.id);
            }
            // Verified changes nothing; a heal that failed leaves it in force.
            FaultPhase::Verified | FaultPhase::HealFailed => {}
        }
    }
    out.extend(open.into_values().map(|from| (from, u64::MAX)));
    out
}

/// Each verified fault: how long from its request until a probe saw it in effect, ms.
fn fault_effects(faults: &[&FaultEvent]) -> Vec<(u64, String, u64)> {
    let mut requested: HashMap<u64, u64> = HashMap::new();
    let mut out = Vec::new();
    for f in faults {
        match f.phase {
            FaultPhase::Requested => {
                requested.insert(f.id, f.at_ns);
            }
            FaultPhase::Verified => {
                if let Some(r) = requested.get(&f.id) {
                    out.push((f.id, format!("{} on {}", f.fault, f.target), f.at_ns.saturating_sub(*r) / 1_000_000));
                }
            }
            _ => {}
        }
    }
    out
}

/// Two acquisitions reported within this of each other may have reached Redis in either order.
const REPORT_RACE_NS: u64 = 100_000_000;

/// Reports of acquisitions can race (two nodes acquire a key that was deleted in between, and
/// the one that took it first reports last). Within [`REPORT_RACE_NS`] the lease's fence counter
/// (issued by Redis on acquire) tells the order; a counter reset (a restart, a failover) shows as a
/// large drop, which is left alone.
fn put_racing_acquisitions_in_redis_order(acquired: &mut [(u64, &str, u64)]) {
    for i in 1..acquired.len() {
        let (a, b) = (acquired[i - 1], acquired[i]);
        let racing = b.0 - a.0 < REPORT_RACE_NS;
        if racing && b.2 > 0 && b.2 < a.2 && a.2 - b.2 < 16 {
            acquired.swap(i - 1, i);
        }
    }
}
