//! Fault coverage: which cells a run (a suite, a simulation batch) exercised. A cell is a fault
//! kind x the phase its target was in when the fault took effect (for a fault on Redis or the
//! store, the owner's phase) x whether that target held the lease, and for a fault on Redis
//! whether the held key survived it. Read from the history alone (node events, fault lines,
//! observer samples), so any node implementation is covered the same way.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::history::{EventKind, FaultKind, FaultPhase, HistoryLine, StoreOp};

/// Where a node was in its round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Trying to acquire (or nobody holds the lease, for a fault on Redis or the store).
    Acquiring,
    /// Acquired, before the first model call.
    Prepare,
    /// Embedding batches (model calls).
    Embed,
    /// Creating the temporary collection.
    Create,
    /// Upserting points.
    Upsert,
    /// Switching the alias.
    Switch,
    /// Persisting the sync record.
    Persist,
    /// A round ended (done, aborted or lost) and no acquire has begun.
    BetweenRounds,
}

impl Phase {
    /// Every phase, in round order (the table's columns).
    pub const ALL: [Phase; 8] = [
        Phase::Acquiring,
        Phase::Prepare,
        Phase::Embed,
        Phase::Create,
        Phase::Upsert,
        Phase::Switch,
        Phase::Persist,
        Phase::BetweenRounds,
    ];

    /// The snake_case name.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Phase::Acquiring => "acquiring",
            Phase::Prepare => "prepare",
            Phase::Embed => "embed",
            Phase::Create => "create",
            Phase::Upsert => "upsert",
            Phase::Switch => "switch",
            Phase::Persist => "persist",
            Phase::BetweenRounds => "between_rounds",
        }
    }
}

/// One exercised cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Cell {
    /// The fault's kind.
    pub fault: FaultKind,
    /// Its target's phase when it took effect.
    pub phase: Phase,
    /// The target held the lease then.
    pub owner: bool,
    /// For a fault on Redis while a node held the lease: whether the held key survived it
    /// (`Some(false)`: the observer saw it gone or held by another during the fault).
    pub key_kept: Option<bool>,
}

/// Counts per cell over one or more histories.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Coverage {
    /// How many faults fell in each cell.
    pub cells: BTreeMap<String, u64>,
}

impl Coverage {
    /// Adds one history's cells.
    pub fn add(&mut self, lines: &[HistoryLine]) {
        for c in cells(lines) {
            *self.cells.entry(key(&c)).or_insert(0) += 1;
        }
    }

    /// Adds another coverage's counts.
    pub fn merge(&mut self, other: &Coverage) {
        for (k, n) in &other.cells {
            let slot = self.cells.entry(k.clone()).or_insert(0);
            *slot = slot.saturating_add(*n);
        }
    }

    /// The count of faults of `kind` in `phase` (owner or not), as (owner, not owner).
    #[must_use]
    pub fn count(&self, kind: FaultKind, phase: Phase) -> (u64, u64) {
        let prefix = format!("{}/{}/", kind.name(), phase.name());
        self.cells.iter().filter(|(k, _)| k.starts_with(&prefix)).fold((0, 0), |(o, n), (k, c)| {
            if k[prefix.len()..].starts_with("owner") {
                (o + c, n)
            } else {
                (o, n + c)
            }
        })
    }

    /// The table: a row per fault kind, a column per phase, each cell `owner/other` counts; `-`
    /// where nothing fell. Redis faults' key outcomes follow the table.
    #[must_use]
    pub fn markdown(&self, kinds: &[FaultKind]) -> String {
        let mut out = String::from("| fault |");
        for p in Phase::ALL {
            out.push_str(&format!(" {} |", p.name()));
        }
        out.push_str("\n|---|");
        out.push_str(&"---|".repeat(Phase::ALL.len()));
        out.push('\n');
        for k in kinds {
            out.push_str(&format!("| {} |", k.name()));
            for p in Phase::ALL {
                let (o, n) = self.count(*k, p);
                let shown = if o + n == 0 { "-".to_owned() } else { format!("{o}/{n}") };
                out.push_str(&format!(" {shown} |"));
            }
            out.push('\n');
        }
        out.push_str("\nEach cell: faults that began while their target held the lease / did not.\n");
        let keys: Vec<String> = self
            .cells
            .iter()
            .filter(|(k, _)| k.ends_with("/key_lost") || k.ends_with("/key_kept"))
            .map(|(k, n)| format!("{k}: {n}"))
            .collect();
        if !keys.is_empty() {
            out.push_str(&format!("Faults on Redis while a node held the lease: {}.\n", keys.join(", ")));
        }
        out
    }
}

/// A cell's key in [`Coverage::cells`]: `kind/phase/owner|other[/key_lost|/key_kept]`.
#[must_use]
pub fn key(c: &Cell) -> String {
    let owner = if c.owner { "owner" } else { "other" };
    let kept = match c.key_kept {
        Some(true) => "/key_kept",
        Some(false) => "/key_lost",
        None => "",
    };
    format!("{}/{}/{owner}{kept}", c.fault.name(), c.phase.name())
}

/// Each fault of the history that took effect (a `verified` line), as a cell.
#[must_use]
pub fn cells(lines: &[HistoryLine]) -> Vec<Cell> {
    let mut nodes: BTreeMap<&str, (Phase, Option<&str>)> = BTreeMap::new();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        match line {
            HistoryLine::Node { node, event, .. } => {
                let state = nodes.entry(node.as_str()).or_insert((Phase::BetweenRounds, None));
                step(state, &event.kind);
            }
            HistoryLine::Fault(f) if f.phase == FaultPhase::Verified => {
                let holder = nodes.iter().find(|(_, (_, token))| token.is_some()).map(|(n, s)| (*n, s.0));
                let (phase, owner) = match nodes.get(f.target.as_str()) {
                    Some((phase, token)) => (*phase, token.is_some()),
                    None => holder.map_or((Phase::Acquiring, false), |(_, p)| (p, true)),
                };
                let on_redis = f.fault.acts_on_redis() && !nodes.contains_key(f.target.as_str());
                let key_kept = (on_redis && owner).then(|| key_survived(&lines[i..], f.id));
                out.push(Cell { fault: f.fault, phase, owner, key_kept });
            }
            _ => {}
        }
    }
    out
}

/// A node's phase and held token after `e`.
fn step<'a>(state: &mut (Phase, Option<&'a str>), e: &'a EventKind) {
    let (phase, token) = state;
    match e {
        EventKind::AcquireAttempt => *phase = Phase::Acquiring,
        EventKind::Acquired { token: t, .. } => (*phase, *token) = (Phase::Prepare, Some(t.as_str())),
        EventKind::ModelCall { .. } => *phase = Phase::Embed,
        EventKind::StoreCallSent { op, .. } => {
            *phase = match op {
                StoreOp::BeginEpoch => Phase::Prepare,
                StoreOp::CreateCollection => Phase::Create,
                StoreOp::Upsert => Phase::Upsert,
                StoreOp::SwitchAlias => Phase::Switch,
                StoreOp::PersistRecord => Phase::Persist,
                StoreOp::DropCollection => *phase,
            }
        }
        EventKind::OwnershipLost { .. } | EventKind::Released { .. } | EventKind::Stopped => {
            (*phase, *token) = (Phase::BetweenRounds, None);
        }
        EventKind::RoundAborted { .. } | EventKind::SyncFinished { .. } => *phase = Phase::BetweenRounds,
        _ => {}
    }
}

/// Whether the observer saw the same holder on the primary from fault `id`'s verification to
/// its heal (no sample in between: kept).
fn key_survived(rest: &[HistoryLine], id: u64) -> bool {
    let mut first: Option<Option<&str>> = None;
    for line in rest {
        match line {
            HistoryLine::Fault(f) if f.id == id && f.phase != FaultPhase::Verified => return true,
            HistoryLine::Observer(o) if o.instance == "redis-primary" && o.error.is_none() => {
                let holder = o.holder.as_deref();
                match first {
                    None => first = Some(holder),
                    Some(h) if h != holder || holder.is_none() => return false,
                    Some(_) => {}
                }
            }
            _ => {}
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{FaultEvent, NodeEvent, ObserverSample};

    fn node(n: &str, kind: EventKind) -> HistoryLine {
        HistoryLine::Node {
            node: n.into(),
            incarnation: 1,
            received_ns: 0,
            event: NodeEvent { mono_ns: 0, round: 1, kind },
        }
    }
    fn fault(id: u64, kind: FaultKind, target: &str, phase: FaultPhase) -> HistoryLine {
        HistoryLine::Fault(FaultEvent {
            id,
            fault: kind,
            target: target.into(),
            phase,
            at_ns: 0,
            detail: String::new(),
            redis_link: None,
            outlasts_ms: None,
        })
    }
    fn seen(holder: Option<&str>) -> HistoryLine {
        HistoryLine::Observer(ObserverSample {
            instance: "redis-primary".into(),
            at_ns: 0,
            holder: holder.map(str::to_owned),
            ttl_ms: None,
            role: None,
            error: None,
            asked_ns: None,
        })
    }

    #[test]
    fn a_fault_falls_in_its_target_s_phase_and_a_redis_fault_in_the_owner_s_with_the_key_s_fate() {
        let t = || "n1/1".to_owned();
        let lines = vec![
            node("n1", EventKind::AcquireAttempt),
            node("n2", EventKind::AcquireAttempt),
            fault(1, FaultKind::Pause, "n2", FaultPhase::Verified),
            node("n1", EventKind::Acquired { token: t(), fence: 1, sent_ns: None }),
            node("n1", EventKind::ModelCall { token: t(), batch: 0, ms: 1, decided_ns: None }),
            fault(2, FaultKind::Pause, "n1", FaultPhase::Verified),
            fault(3, FaultKind::KeyLoss, "redis-primary", FaultPhase::Verified),
            seen(Some("n1/1")),
            seen(None),
            fault(3, FaultKind::KeyLoss, "redis-primary", FaultPhase::Healed),
            fault(4, FaultKind::PauseWrites, "redis-primary", FaultPhase::Verified),
            seen(Some("n1/1")),
            seen(Some("n1/1")),
            node("n1", EventKind::OwnershipLost { token: t(), reason: "expired".into(), checkpoint: None }),
            fault(5, FaultKind::SlowStore, "store", FaultPhase::Verified),
            fault(6, FaultKind::Crash, "n1", FaultPhase::Requested),
        ];
        let got = cells(&lines);
        let cell = |fault, phase, owner, key_kept| Cell { fault, phase, owner, key_kept };
        assert_eq!(
            got,
            vec![
                cell(FaultKind::Pause, Phase::Acquiring, false, None),
                cell(FaultKind::Pause, Phase::Embed, true, None),
                cell(FaultKind::KeyLoss, Phase::Embed, true, Some(false)),
                cell(FaultKind::PauseWrites, Phase::Embed, true, Some(true)),
                cell(FaultKind::SlowStore, Phase::Acquiring, false, None),
            ],
            "a fault never verified is no cell"
        );
        let mut c = Coverage::default();
        c.add(&lines);
        c.add(&lines);
        assert_eq!(c.count(FaultKind::Pause, Phase::Embed), (2, 0));
        assert_eq!(c.cells.get("key_loss/embed/owner/key_lost"), Some(&2));
        let table = c.markdown(&[FaultKind::Pause, FaultKind::Crash]);
        assert!(table.contains("| pause | 0/2 | - | 2/0 |"), "{table}");
        assert!(table.contains("| crash | - | - | - | - | - | - | - | - |"), "{table}");
    }
}
