//! Drift: the environment changed in a way no declared fault explains, so the run no longer tests
//! its scenario. Not the implementation's doing: the run is inconclusive, naming what drifted.
//! Two sources: the observer's samples (a Redis role change with no failover in effect) and the
//! environment's events (a container that stopped, started or froze; a node's proxy gone or
//! disabled; the proxy API silent).

use std::collections::{BTreeMap, HashSet};

use leasequake_reports::history::{EnvChange, EnvEvent, FaultKind, ObserverSample};

use super::Faults;

/// A Redis instance whose role changed while no failover was declared in effect: the environment
/// drifted (Sentinel failed over on its own, say during a long write pause), and the run no longer
/// tests its scenario: the nodes' proxies still point where the scenario put them. Not the
/// implementation's doing, so inconclusive, naming the instance and when (the first per instance).
/// With `follow` (the nodes followed failovers as Sentinel-aware clients) a role change is part of
/// the run, judged like any other moment.
pub(super) fn roles(
    observer: &[&ObserverSample],
    faults: &Faults,
    started_ns: u64,
    follow: bool,
    out: &mut Vec<String>,
) -> bool {
    if follow {
        return false;
    }
    let secs = |ns: u64| ns.saturating_sub(started_ns) as f64 / 1e9;
    let mut last: BTreeMap<&str, (&str, u64)> = BTreeMap::new();
    let mut named: HashSet<&str> = HashSet::new();
    for o in observer {
        let Some(role) = o.role.as_deref() else { continue };
        // The instance was read between the sample's asking and its answer: the change lies
        // between the reading before (as early as it was asked) and this one's answer.
        let Some((was, since)) = last.insert(&o.instance, (role, o.asked_ns.unwrap_or(o.at_ns))) else { continue };
        if was != role && !faults.covers_any(FaultKind::changes_roles, since, o.at_ns) && named.insert(&o.instance) {
            out.push(format!(
                "the environment drifted: {} went from {was} to {role} between {:.1} s and {:.1} s with no failover declared \
                 in effect (Sentinel failed over on its own?); the nodes were not told, so the run no longer tests its scenario",
                o.instance,
                secs(since),
                secs(o.at_ns)
            ));
        }
    }
    !named.is_empty()
}

/// Environment events no declared fault explains, the first per subject. A Sentinel's
/// announcement is never drift on its own: what the nodes meet is the instances' roles, which
/// [`roles`] judges. A container of redis-primary that died and started again while a
/// `redis_restart` was in effect is that fault. Nothing else in the environment is stopped,
/// started, frozen or re-listed by a fault, so anything else is drift, with or without
/// `follow_failovers`.
pub(super) fn environment(events: &[&EnvEvent], faults: &Faults, started_ns: u64, out: &mut Vec<String>) -> bool {
    let mut named: HashSet<&str> = HashSet::new();
    for e in events {
        let explained = match e.change {
            EnvChange::Sentinel | EnvChange::SwitchMaster => true,
            EnvChange::ContainerDied | EnvChange::ContainerStarted => {
                e.subject == "redis-primary"
                    && faults.covers_any(FaultKind::restarts_the_primary_container, e.at_ns, e.at_ns)
            }
            EnvChange::ContainerOther
            | EnvChange::ProxyChanged
            | EnvChange::ProxyUnreachable
            | EnvChange::ClockStepped => false,
        };
        if !explained && named.insert(&e.subject) {
            out.push(format!(
                "the environment drifted: {} at {:.1} s ({}, seen by {}) with no fault declared that does it; \
                 the run no longer tests its scenario",
                leasequake_reports::printable(&e.subject),
                e.at_ns.saturating_sub(started_ns) as f64 / 1e9,
                leasequake_reports::printable(&e.detail),
                leasequake_reports::printable(&e.source),
            ));
        }
    }
    !named.is_empty()
}
