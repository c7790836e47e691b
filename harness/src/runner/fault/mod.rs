//! Faults: one module per family (the per-node proxies, the node processes, Redis itself), each
//! kind's apply, its independent probe and its heal side by side. The runner's timeline calls
//! [`apply`] and [`heal`]; [`Active`] holds what is in effect and, dropped with faults still in it,
//! undoes what can be undone without waiting (the backstop; the timeline heals on its normal path).
//!
//! A fault's outcome is typed: `apply` gives the probe's observation or why it did not verify
//! (`FaultPhase::Verified` / `Failed` in the history), [`Heal`] says whether it was undone.

mod process;
mod proxy;
mod redis;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use leasequake_reports::history::{FaultEvent, FaultPhase, HistoryLine};
use leasequake_toxiproxy::Client as ProxyClient;
use rustix::process::Signal;
use tokio::sync::broadcast;
use tracing::warn;

use crate::clock::mono_ns;
use crate::env::Environment;
use crate::holders::Holders;
use crate::scenario::{Fault, FaultKind, Scenario};
use crate::supervisor::{NodeHandle, Received};

pub(crate) use process::{clock_file, stopped, write_clock_offset};
#[cfg(test)]
pub(crate) use redis::follow_delays;
pub(crate) use redis::{cut_primary, rejoin_primary, signal_primary};

/// What a fault acts on and probes through.
pub(crate) struct World<'a> {
    pub s: &'a Scenario,
    pub env: &'a Environment,
    pub proxy: &'a ProxyClient,
    /// The run directory (the nodes' clock files live in it).
    pub dir: &'a Path,
    /// The lease key and whose each value in it is.
    pub lease: &'a Holders,
    /// Every node event, for the probes that wait for one.
    pub events: &'a broadcast::Sender<Arc<Received>>,
}

/// The node processes, as a heal needs them: a crashed node is started again.
pub(crate) trait Nodes {
    /// Node `index`'s handle, if it runs.
    fn handle(&self, index: u32) -> Option<NodeHandle>;
    /// Starts node `index` again as a new incarnation; returns the incarnation.
    fn restart(&mut self, index: u32) -> Result<u64, String>;
}

/// A fault in effect: what it is, whom it hit.
pub(crate) struct Applied {
    pub id: u64,
    pub fault: Fault,
    pub target: String,
    pub index: u32,
    /// The node it acts on, when it is a node (for the backstop).
    pub node: Option<NodeHandle>,
}

/// How undoing a fault went.
pub(crate) enum Heal {
    /// Undone; what was seen.
    Done(String),
    /// Undone, but the environment did not settle after it (the old primary stayed a master):
    /// the verdict cannot stand on this environment.
    Unsettled(String),
    /// Not undone: the fault may still be in effect.
    Failed(String),
}

impl Heal {
    fn done(what: &str) -> Self {
        Self::Done(what.to_owned())
    }

    /// What the heal line says.
    pub fn detail(&self) -> String {
        match self {
            Self::Done(d) | Self::Failed(d) => d.clone(),
            Self::Unsettled(d) => format!("settling failed: {d}"),
        }
    }
}

/// Applies one fault and verifies it with an independent probe; the detail says what was seen.
pub(crate) async fn apply(
    w: &World<'_>,
    id: u64,
    f: &Fault,
    index: u32,
    node: Option<&NodeHandle>,
) -> Result<String, String> {
    match f.kind {
        FaultKind::Partition => proxy::partition(w, id, f, index).await,
        FaultKind::SlowRedis => proxy::slow_redis(w, id, f, index).await,
        FaultKind::LoseReplies => match f.command {
            Some(aimed) => proxy::lose_aimed(w, id, index, aimed).await,
            None => proxy::lose_replies(w, id, index).await,
        },
        FaultKind::SlowStore | FaultKind::FailingStore => proxy::store(w, id, f).await,
        FaultKind::Pause => process::pause(node).await,
        FaultKind::Crash => process::crash(node).await,
        // A lock that renews out of the node's reach is stalled on the wire; a node that sees its
        // renewals is asked (its renewal thread freezes while its pipeline runs on).
        FaultKind::StallRenewal if w.lease.hidden_renewals(Some(&format!("n{index}"))).is_some() => {
            proxy::stall_renewal(w, id, index).await
        }
        FaultKind::StallRenewal => process::stall_renewal(w, f, node).await,
        FaultKind::SlowModel if proxy::calls_model_service(w, index).await => proxy::slow_model(w, id, f, index).await,
        FaultKind::SlowModel => process::slow_model(w, f, node).await,
        FaultKind::ClockJump if f.target.is_some() => process::node_clock(w, f, index, node).await,
        FaultKind::ClockJump => redis::clock_jump(w, f).await,
        FaultKind::KeyLoss => redis::key_loss(w).await,
        FaultKind::PauseWrites => redis::pause_writes(w, f).await,
        FaultKind::RedisRestart => redis::redis_restart(w).await,
        FaultKind::Failover => redis::failover(w, f).await,
    }
}

/// Undoes one fault. With `settle`, a heal that leaves the environment moving (an old primary
/// coming back) lasts until it has settled.
pub(crate) async fn heal(w: &World<'_>, a: &Applied, settle: bool, nodes: &mut dyn Nodes) -> Heal {
    match a.fault.kind {
        FaultKind::Partition => proxy::heal_partition(w, a).await,
        FaultKind::SlowRedis => proxy::heal_slow_redis(w, a).await,
        FaultKind::LoseReplies => proxy::heal_lose_replies(w, a).await,
        FaultKind::SlowStore | FaultKind::FailingStore => proxy::heal_store(w, a).await,
        FaultKind::Pause => process::heal_pause(nodes, a),
        FaultKind::Crash => process::heal_crash(nodes, a),
        FaultKind::StallRenewal => match proxy::heal_stall(w, a).await {
            Some(healed) => healed,
            None => Heal::done("the stall ends by itself"),
        },
        FaultKind::SlowModel => match proxy::heal_slow_model(w, a).await {
            Some(healed) => healed,
            None => process::heal_slow_model(nodes, a),
        },
        FaultKind::ClockJump if a.fault.target.is_some() => process::heal_node_clock(w, a),
        FaultKind::ClockJump => redis::heal_clock_jump(w).await,
        FaultKind::KeyLoss => Heal::done("nothing to undo: the key is gone"),
        FaultKind::PauseWrites => redis::heal_pause_writes(w).await,
        FaultKind::RedisRestart => Heal::done("nothing to undo: the data is gone for good"),
        FaultKind::Failover => redis::heal_failover(w, a, settle).await,
    }
}

/// What a fault without a node target acts on.
pub(crate) fn untargeted(kind: FaultKind) -> &'static str {
    if kind.acts_on_redis() {
        "redis-primary"
    } else {
        "store"
    }
}

/// A fault's verified or failed line for the history.
pub(crate) fn outcome_line(id: u64, f: &Fault, target: &str, outcome: &Result<String, String>) -> HistoryLine {
    outcome_line_at(id, f, target, outcome, mono_ns())
}

/// A fault's verified or failed line, stamped `at_ns` (the simulation's clock).
pub(crate) fn outcome_line_at(
    id: u64,
    f: &Fault,
    target: &str,
    outcome: &Result<String, String>,
    at_ns: u64,
) -> HistoryLine {
    let (phase, detail) = match outcome {
        Ok(d) => (FaultPhase::Verified, d.clone()),
        Err(why) => (FaultPhase::Failed, why.clone()),
    };
    HistoryLine::Fault(FaultEvent {
        id,
        fault: f.kind,
        target: target.to_owned(),
        phase,
        at_ns,
        detail,
        redis_link: (phase == FaultPhase::Verified).then(|| proxy::redis_link(f)).flatten(),
        outlasts_ms: None,
    })
}

/// How long `f`'s effect may outlast its heal, ms (a healed line's `outlasts_ms`): a forward step
/// of Redis's clock, because every key written during it carries an expiry the step later (a
/// stopped holder's lease outlives the heal by up to the step, and no client can shorten a key
/// it does not hold). Nothing else outlasts its heal.
#[must_use]
pub fn outlasts_heal_ms(f: &Fault) -> Option<u64> {
    match (f.kind, f.target.as_deref(), f.jump_ms) {
        (FaultKind::ClockJump, None, Some(jump)) if jump > 0 => Some(jump.unsigned_abs()),
        _ => None,
    }
}

/// The faults in effect, by their place in the schedule. The timeline heals each at its time;
/// dropped with faults still in it (the run's future cancelled, a panic), it undoes what needs no
/// waiting: a stopped node is continued and a node's wall clock set back. Faults in the
/// containers and the proxy go with the environment's teardown; an attached environment keeps
/// them until its next run replaces the proxies (said in the log).
#[must_use]
pub(crate) struct Active {
    map: BTreeMap<usize, Applied>,
    /// The run directory (the nodes' clock files).
    dir: std::path::PathBuf,
}

impl Active {
    pub fn new(dir: &Path) -> Self {
        Self { map: BTreeMap::new(), dir: dir.to_path_buf() }
    }

    pub fn insert(&mut self, i: usize, a: Applied) {
        self.map.insert(i, a);
    }

    pub fn remove(&mut self, i: usize) -> Option<Applied> {
        self.map.remove(&i)
    }

    /// Everything still in effect, handed to the caller to heal.
    pub fn take_all(&mut self) -> Vec<Applied> {
        std::mem::take(&mut self.map).into_values().collect()
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        for a in self.map.values() {
            match (a.fault.kind, &a.node) {
                (FaultKind::Pause, Some(n)) => {
                    let _ = n.signal(Signal::CONT);
                }
                (FaultKind::ClockJump, _) if a.fault.target.is_some() => {
                    let _ = write_clock_offset(&clock_file(&self.dir, a.index), 0);
                }
                _ => {}
            }
            warn!(fault = a.id, kind = %a.fault.kind, target = %a.target, "fault still applied when the run ended");
        }
    }
}

/// The host's wall clock, ms since the epoch (what a stepped clock is measured against).
fn unix_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

#[cfg(test)]
mod tests {
    use super::{clock_file, write_clock_offset, Active, Applied};

    fn a_node_clock_step() -> crate::scenario::Fault {
        let text = "name = \"c\"\ndescription = \"d\"\nincident = \"i\"\nduration_s = 30\n[nodes]\ncount = 2\n\
                    [lease]\nttl_ms = 3000\n[store]\npolicy = \"enforce\"\nfence_source = \"store\"\n[[faults]]\n\
                    kind = \"clock_jump\"\ntarget = \"n2\"\nat_s = 5\nduration_s = 5\njump_ms = -20000\n";
        let s = crate::scenario::parse(std::path::Path::new("c.toml"), text).unwrap();
        s.faults[0].clone()
    }

    #[test]
    fn faults_left_applied_are_undone_where_no_waiting_is_needed_when_dropped() {
        let dir = std::env::temp_dir().join(format!("leasequake-active-{}", std::process::id()));
        let file = clock_file(&dir, 2);
        write_clock_offset(&file, -20_000).unwrap();
        let applied = |id| Applied { id, fault: a_node_clock_step(), target: "n2".into(), index: 2, node: None };
        // Healed on the normal path: taken out, nothing left for the backstop.
        let mut active = Active::new(&dir);
        active.insert(0, applied(1));
        assert_eq!(active.remove(0).map(|a| a.id), Some(1));
        drop(active);
        assert!(std::fs::read_to_string(&file).unwrap().trim().starts_with("-20000"));
        // Left applied (a run's future dropped mid-way): the node's clock goes back to the host's.
        let mut active = Active::new(&dir);
        active.insert(0, applied(1));
        drop(active);
        assert_eq!(std::fs::read_to_string(&file).unwrap().trim(), "+0");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
