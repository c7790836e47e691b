//! Who holds the lease, as the harness follows it through a run: the Redis key the nodes keep it
//! under (the protocol's `leasequake:{tenant}:lease`, or the key their `hello` declares, protocol
//! 3: a lock library picks its own), whose each value in that key is (the tokens of the nodes'
//! `acquired` events; a token of protocol 1 or 2 also names its node by its `node/` prefix), and
//! which node acquired last (the `owner` a fault targets). Filled by the event collector; read by
//! the observer, the faults' probes and the timeline.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, PoisonError, RwLock};

use leasequake_reports::history::{lease_key, EventKind, Renewals};

/// How many tokens are remembered (the oldest go first): a run makes a few hundred acquisitions,
/// and a key only ever holds a recent one.
const TOKENS_KEPT: usize = 4096;

/// Whose a value of the lease key is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Holder {
    /// The key is empty or gone.
    Nobody,
    /// A node's token.
    Node(String),
    /// A value no node reported as its token (yet): whose it is cannot be told.
    Unknown(String),
}

/// The run's view of the lease key and its holders.
#[derive(Debug)]
pub struct Holders {
    nodes: u32,
    /// The key, and whether a node declared it.
    key: RwLock<(String, bool)>,
    tokens: Mutex<(HashMap<String, String>, VecDeque<String>)>,
    owner: Mutex<Option<String>>,
    /// The nodes whose `hello` declared hidden renewals.
    hidden: Mutex<std::collections::BTreeSet<String>>,
    /// Each node's protocol version, from its `hello`.
    protocols: Mutex<HashMap<String, u32>>,
}

impl Holders {
    /// The view of a run of `nodes` nodes on `tenant`, before any node has spoken.
    #[must_use]
    pub fn new(tenant: &str, nodes: u32) -> Self {
        Self {
            nodes,
            key: RwLock::new((lease_key(tenant), false)),
            tokens: Mutex::default(),
            owner: Mutex::default(),
            hidden: Mutex::default(),
            protocols: Mutex::default(),
        }
    }

    /// The Redis key holding the lease.
    #[must_use]
    pub fn key(&self) -> String {
        self.key.read().unwrap_or_else(PoisonError::into_inner).0.clone()
    }

    /// The node acquired last, if any did.
    #[must_use]
    pub fn owner(&self) -> Option<String> {
        self.owner.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Takes in one event of `node`: a declared key (the first declaration stands; nodes that
    /// declare different keys are judged inconclusive by the checker, from their `hello`s), an
    /// acquisition's token and owner.
    pub fn saw(&self, node: &str, event: &EventKind) {
        match event {
            EventKind::Hello { lease_key, renewals, protocol, .. } => {
                self.protocols.lock().unwrap_or_else(PoisonError::into_inner).insert(node.to_owned(), *protocol);
                if *renewals == Some(Renewals::Hidden) {
                    self.hidden.lock().unwrap_or_else(PoisonError::into_inner).insert(node.to_owned());
                }
                let mut k = self.key.write().unwrap_or_else(PoisonError::into_inner);
                if let (Some(key), false) = (lease_key, k.1) {
                    *k = (key.clone(), true);
                }
            }
            EventKind::Acquired { token, .. } => {
                let mut guard = self.tokens.lock().unwrap_or_else(PoisonError::into_inner);
                let (by_token, order) = &mut *guard;
                if by_token.insert(token.clone(), node.to_owned()).is_none() {
                    order.push_back(token.clone());
                }
                while order.len() > TOKENS_KEPT {
                    if let Some(old) = order.pop_front() {
                        by_token.remove(&old);
                    }
                }
                *self.owner.lock().unwrap_or_else(PoisonError::into_inner) = Some(node.to_owned());
            }
            _ => {}
        }
    }

    /// The protocol version `node` speaks, once its `hello` came.
    #[must_use]
    pub fn protocol(&self, node: &str) -> Option<u32> {
        self.protocols.lock().unwrap_or_else(PoisonError::into_inner).get(node).copied()
    }

    /// Why a fault that needs `node`'s renewals (`None`: any node's) cannot take effect, if its
    /// `hello` declared them hidden: said next to the fault's failure.
    #[must_use]
    pub fn hidden_renewals(&self, node: Option<&str>) -> Option<String> {
        let hidden = self.hidden.lock().unwrap_or_else(PoisonError::into_inner);
        let who: Vec<String> = match node {
            Some(n) => hidden.iter().filter(|h| *h == n).cloned().collect(),
            None => hidden.iter().cloned().collect(),
        };
        let (their, locks_renew) =
            if who.len() == 1 { ("its", "its lock renews") } else { ("their", "their locks renew") };
        (!who.is_empty()).then(|| {
            format!(
                "{} declared {their} renewals hidden (`hello`, `renewals: hidden`): {locks_renew} out of the node's \
                 reach and sight, so no `renewed` is reported and `stall_renewal` cannot stop it",
                who.join(", ")
            )
        })
    }

    /// Whose `value` (a GET of the lease key, trimmed; empty for none) is.
    #[must_use]
    pub fn holder(&self, value: &str) -> Holder {
        if value.is_empty() {
            return Holder::Nobody;
        }
        let known = self.tokens.lock().unwrap_or_else(PoisonError::into_inner).0.get(value).cloned();
        if let Some(node) = known {
            return Holder::Node(node);
        }
        let named = (1..=self.nodes)
            .map(|i| format!("n{i}"))
            .find(|n| value.strip_prefix(n.as_str()).is_some_and(|rest| rest.starts_with('/')));
        named.map_or_else(|| Holder::Unknown(value.to_owned()), Holder::Node)
    }

    /// Whether `value` is `node`'s token.
    #[must_use]
    pub fn held_by(&self, value: &str, node: &str) -> bool {
        self.holder(value) == Holder::Node(node.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::{Holder, Holders};
    use leasequake_reports::history::{EventKind, Renewals};

    fn hello(key: Option<&str>) -> EventKind {
        EventKind::Hello {
            protocol: 3,
            implementation: "lib".into(),
            lease_key: key.map(str::to_owned),
            renewals: Some(Renewals::Hidden),
        }
    }

    fn acquired(token: &str) -> EventKind {
        EventKind::Acquired { token: token.into(), fence: 1, sent_ns: None }
    }

    #[test]
    fn a_declared_key_and_reported_tokens_name_the_holder() {
        let h = Holders::new("t1", 2);
        assert_eq!(h.key(), "leasequake:{t1}:lease");
        h.saw("n1", &hello(None));
        assert_eq!(h.key(), "leasequake:{t1}:lease", "no declaration, the default");
        h.saw("n1", &hello(Some("lock:t1")));
        h.saw("n2", &hello(Some("lock:other")));
        assert_eq!(h.key(), "lock:t1", "the first declaration stands");
        assert_eq!(h.holder("x9Qz+a=="), Holder::Unknown("x9Qz+a==".into()), "not reported yet");
        h.saw("n2", &acquired("x9Qz+a=="));
        assert_eq!(h.holder("x9Qz+a=="), Holder::Node("n2".into()));
        assert!(h.held_by("x9Qz+a==", "n2") && !h.held_by("x9Qz+a==", "n1"));
        assert_eq!(h.owner().as_deref(), Some("n2"));
        assert_eq!(h.holder(""), Holder::Nobody);
        let why = h.hidden_renewals(Some("n1")).unwrap_or_default();
        assert!(why.contains("n1 declared its renewals hidden"), "{why}");
        assert!(h.hidden_renewals(Some("n3")).is_none() && h.hidden_renewals(None).is_some());
    }

    #[test]
    fn a_prefixed_token_names_its_node_before_it_is_reported_and_only_a_node_of_the_run() {
        let h = Holders::new("t1", 2);
        assert_eq!(h.holder("n2/1/0/ab"), Holder::Node("n2".into()));
        assert_eq!(h.holder("n12/1/0/ab"), Holder::Unknown("n12/1/0/ab".into()));
        assert_eq!(h.holder("n3/1/0/ab"), Holder::Unknown("n3/1/0/ab".into()), "two nodes in this run");
    }

    #[test]
    fn the_oldest_tokens_are_forgotten_past_the_bound() {
        let h = Holders::new("t1", 1);
        for i in 0..=super::TOKENS_KEPT {
            h.saw("n1", &acquired(&format!("tok{i}")));
        }
        assert_eq!(h.holder("tok0"), Holder::Unknown("tok0".into()));
        assert_eq!(h.holder(&format!("tok{}", super::TOKENS_KEPT)), Holder::Node("n1".into()));
    }
}
