//! Triggers: faults armed to fire on something a node or the observer reports (a checkpoint, an
//! acquire, a key that ran out, a role that changed), handed to the schedule, which applies each
//! before the node is let go; and the nodes following a new master (`follow_failovers`).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use leasequake_reports::history::EventKind;
use leasequake_reports::wire::{classify, LeaseOp, Outcome, Scripts};
use leasequake_toxiproxy::Client as ProxyClient;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::env::NodeLink;
use crate::holders::Holders;
use crate::scenario::{Observed, Trigger};

/// A fault waiting for its trigger: its index, the trigger, the node it waits for (any, if none).
pub type Armed = (usize, Trigger, Option<String>);

/// A triggered fault handed to the schedule: its index, the node it hits, and a channel the
/// schedule answers on once it is applied.
pub type Hit = (usize, String, tokio::sync::oneshot::Sender<()>);

/// Points every node's Redis proxy at `seen`'s instance when it became master (the nodes follow
/// failovers as Sentinel-aware clients do). A proxy that cannot be moved is logged: the run then
/// shows it as lost liveness, and the log says why.
pub async fn follow_master(proxy: &ProxyClient, count: u32, seen: &Observed) {
    let Observed::RoleChanged { instance, role } = seen else { return };
    if role != "master" {
        return;
    }
    for i in 1..=count {
        let name = format!("n{i}-redis");
        match tokio::time::timeout(Duration::from_secs(5), proxy.set_upstream(&name, &format!("{instance}:6379"))).await
        {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => warn!(proxy = %name, error = %e, "could not follow the new master"),
            Err(_) => warn!(proxy = %name, "could not follow the new master within 5 s"),
        }
    }
    info!(%instance, nodes = count, "the nodes' Redis proxies follow the new master (follow_failovers)");
}

/// Fires every fault armed for what the observer saw. A fault aimed at a named node hits it; one
/// aimed at the owner hits the node that held the expired key; one on Redis or the store, its own.
pub async fn fire_observed(armed: &Mutex<Vec<Armed>>, seen: &Observed, hits: &mpsc::Sender<Hit>) {
    let node = match seen {
        Observed::KeyExpired { node } => node.as_str(),
        Observed::RoleChanged { .. } => "",
    };
    fire(armed, hits, |t| t.fired_by_observed(seen), node).await;
}

/// How often the wire of a node with hidden renewals is read while a `renewed` trigger waits.
const WIRE_POLL: Duration = Duration::from_millis(50);

/// `renewed` triggers for the nodes whose renewals are hidden (`hello`, `renewals: hidden`): they
/// report none, so a renewal is read off their Redis link instead (a renewal of the lease key that
/// Redis confirmed, to the node's own token), while such a trigger is armed. Until `stop`.
pub async fn wire_renewals(
    proxy: &ProxyClient,
    lease: &Holders,
    count: u32,
    (armed, hits): (&Mutex<Vec<Armed>>, &mpsc::Sender<Hit>),
    stop: &CancellationToken,
) {
    let renewed = EventKind::Renewed { token: String::new(), sent_ns: None };
    // Per node: the last seq read and the scripts seen on its link.
    let mut read: HashMap<u32, (u64, Scripts)> = HashMap::new();
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(WIRE_POLL) => {}
        }
        let waiting = armed.lock().unwrap_or_else(PoisonError::into_inner).iter().any(|(_, t, _)| t.fired_by(&renewed));
        if !waiting {
            continue;
        }
        for i in 1..=count {
            let node = format!("n{i}");
            if lease.hidden_renewals(Some(&node)).is_none() {
                continue;
            }
            let (after, scripts) = read.entry(i).or_insert((0, Scripts::default()));
            let Ok(Some(page)) = proxy.witness(&NodeLink::Redis.proxy(i), *after).await else { continue };
            let fresh = *after > 0;
            *after = page.records.last().map_or(*after, |r| r.seq);
            for r in &page.records {
                *scripts = Scripts::learn(std::iter::once(r)).merged(std::mem::take(scripts));
                let Some(c) = classify(r, &lease.key(), "", scripts) else { continue };
                let own = c.token.as_deref().is_some_and(|t| lease.held_by(t, &node));
                let renewal = c.op == LeaseOp::Renew || (c.op == LeaseOp::AcquireOrRenew && own);
                if fresh && renewal && c.outcome == Outcome::Done && r.reply_ns.is_some() {
                    fire(armed, hits, |t| t.fired_by(&renewed), &node).await;
                }
            }
        }
    }
}

/// Fires, in the order they were armed, every armed fault whose trigger `fires` and whose named
/// target is `node` (any, when no node triggered), handing each to the schedule and waiting (at
/// most 10 s) until it is applied. A fault without a named target hits `node`.
pub async fn fire(armed: &Mutex<Vec<Armed>>, hits: &mpsc::Sender<Hit>, fires: impl Fn(&Trigger) -> bool, node: &str) {
    let fired: Vec<(usize, String)> = {
        let mut a = armed.lock().unwrap_or_else(PoisonError::into_inner);
        let hit = |(_, t, target): &Armed| fires(t) && target.as_deref().is_none_or(|n| node.is_empty() || n == node);
        let fired =
            a.iter().filter(|x| hit(x)).map(|(i, _, target)| (*i, target.clone().unwrap_or(node.to_owned()))).collect();
        a.retain(|x| !hit(x));
        fired
    };
    for (i, target) in fired {
        let (done_tx, done_rx) = tokio::sync::oneshot::channel();
        if hits.send((i, target, done_tx)).await.is_ok() {
            let _ = tokio::time::timeout(Duration::from_secs(10), done_rx).await;
        }
    }
}
