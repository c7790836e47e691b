//! What the nodes declared of themselves in `hello` (protocol 3): the lease key they keep their
//! lease under, and whether they see their renewals. A node whose lock library renews out of its
//! sight reports no `renewed`: the properties that read renewals are not applicable to it, never
//! violated for the lack of them. Nodes that declare different keys do not contend for one lease:
//! the run tested something else, and says so.

use std::collections::{BTreeMap, HashMap, HashSet};

use leasequake_reports::history::{lease_key, EventKind, ObserverSample, Renewals};
use leasequake_reports::{printable, PropertyResult, PropertyStatus};

use super::NodeLine;

/// The nodes' declarations.
pub(super) struct Declared<'a> {
    /// The nodes that declared `renewals: hidden`.
    pub hidden: HashSet<&'a str>,
    /// Each node's lease key (the protocol's default where it declared none).
    keys: BTreeMap<&'a str, String>,
}

impl<'a> Declared<'a> {
    /// Reads the `hello`s.
    pub fn read(nodes: &[NodeLine<'a>]) -> Self {
        let mut d = Self { hidden: HashSet::new(), keys: BTreeMap::new() };
        for n in nodes {
            if let EventKind::Hello { lease_key: key, renewals, .. } = n.kind {
                if *renewals == Some(Renewals::Hidden) {
                    d.hidden.insert(n.node);
                }
                let k = key.clone().unwrap_or_else(|| format!("the protocol's {}", lease_key("<tenant>")));
                d.keys.insert(n.node, k);
            }
        }
        d
    }

    /// Why the run is inconclusive for the keys, if the nodes declared more than one.
    pub fn key_conflict(&self) -> Option<String> {
        let distinct: HashSet<&String> = self.keys.values().collect();
        (distinct.len() > 1).then(|| {
            let each: Vec<String> = self.keys.iter().map(|(n, k)| format!("{n}: {}", printable(k))).collect();
            format!(
                "the nodes keep their lease under different Redis keys ({}): they do not contend for one lease, so \
                 the run tests nothing of it (every node of a run declares the same `lease_key` in `hello`)",
                each.join(", ")
            )
        })
    }

    /// The lines of the nodes that report their renewals.
    pub fn renewing<'n>(&self, nodes: &'n [NodeLine<'a>]) -> Vec<NodeLine<'a>> {
        nodes.iter().filter(|n| !self.hidden.contains(n.node)).copied().collect()
    }

    /// A renewal property judged over [`Self::renewing`], said for the nodes left out: not
    /// applicable when it judged none of them, else the nodes named next to its sentence.
    pub fn renewal_property(&self, mut p: PropertyResult) -> PropertyResult {
        if self.hidden.is_empty() {
            return p;
        }
        let mut names: Vec<&str> = self.hidden.iter().copied().collect();
        names.sort_unstable();
        let (whose, lock) = if names.len() == 1 { ("its", "lock renews") } else { ("their", "locks renew") };
        let why = format!(
            "{} declared that {whose} {lock} out of sight (`hello` with `renewals: hidden`): no renewal events to \
             judge",
            names.join(", ")
        );
        match p.status {
            PropertyStatus::NotApplicable => p.sentence = why,
            _ => p.sentence = format!("{} ({why}, so not judged)", p.sentence),
        }
        p
    }
}

/// The time the nodes held acquisitions, in total, past which the observer must have seen a holder.
const UNSEEN_SPAN_NS: u64 = 2_000_000_000;

/// The good observer samples needed before an empty key says anything.
const UNSEEN_SAMPLES: usize = 8;

/// Why the run is inconclusive because the harness never saw the nodes' lease where it looks, or
/// None: the nodes held acquisitions for two seconds or more in total and no good observer sample
/// of any instance showed a holder. A lease kept under a key the nodes did not declare makes every
/// fault on the key act on nothing (a deleted key nobody held, an expiry that never comes): a pass
/// would say nothing.
pub(super) fn unseen_key(nodes: &[NodeLine], observer: &[&ObserverSample]) -> Option<String> {
    let good: Vec<_> = observer.iter().filter(|o| o.error.is_none()).collect();
    if good.len() < UNSEEN_SAMPLES || good.iter().any(|o| o.holder.is_some()) {
        return None;
    }
    let mut spans: HashMap<(&str, &str), (u64, u64)> = HashMap::new();
    for n in nodes {
        if let Some(token) = n.kind.token() {
            let acquired = matches!(n.kind, EventKind::Acquired { .. });
            match spans.get_mut(&(n.node, token)) {
                Some(span) => span.1 = n.at_ns,
                None if acquired => {
                    spans.insert((n.node, token), (n.at_ns, n.at_ns));
                }
                None => {}
            }
        }
    }
    let held: u64 = spans.values().map(|(from, to)| to.saturating_sub(*from)).sum();
    (held >= UNSEEN_SPAN_NS).then(|| {
        format!(
            "the nodes held {} acquisitions for {} ms in all, yet none of {} observer samples saw a holder in the \
             lease key: the nodes keep their lease under another key (a node whose lock picks its own declares it: \
             `lease_key` in `hello`, protocol 3), so no fault on the key reached it",
            spans.len(),
            held / 1_000_000,
            good.len()
        )
    })
}
