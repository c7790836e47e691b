//! `cargo bench -p leasequake --bench check`: the checker on a generated history of 1 M events
//! (rounds of node events and audit records from three nodes, with losses, fenced rejections,
//! faults and observer samples). Prints the time against the target (< 1 s); asserts nothing.

use std::time::Instant;

use leasequake::check::check;
use leasequake_reports::history::{
    AuditRecord, EventKind, FaultEvent, FaultPhase, FenceSource, Header, HistoryLine, NodeEvent, ObserverSample,
    Snapshot, StoreOp, StorePolicy,
};

const EVENTS: usize = 1_000_000;

fn main() {
    let started = Instant::now();
    let h = generate(EVENTS);
    let generated = started.elapsed();
    let t = Instant::now();
    let result = check(&h);
    let took = t.elapsed();
    println!("generated {} history lines in {:.2} s", h.len(), generated.as_secs_f64());
    println!(
        "checker: {} lines in {:.3} s  ({:.1} M lines/s)   target < 1 s for 1 M: ratio {:.2}   verdict {:?}",
        h.len(),
        took.as_secs_f64(),
        h.len() as f64 / took.as_secs_f64() / 1e6,
        took.as_secs_f64() / (h.len() as f64 / 1e6),
        result.verdict
    );
    if let Some(why) = result.inconclusive.first() {
        println!("(inconclusive because: {why})");
    }
}

fn generate(n: usize) -> Vec<HistoryLine> {
    let mut h = vec![HistoryLine::Header(Header {
        version: 1,
        run_id: "bench".into(),
        scenario: "bench".into(),
        seed: 1,
        tenant: "t".into(),
        policy: StorePolicy::Enforce,
        fence_source: FenceSource::Redis,
        expected: None,
        liveness_bound_ms: 10_000,
        node_silence_ms: 60_000,
        observer_gap_ms: 60_000,
        started_ns: 0,
        audit_after: 0,
        waste_budget_ms: None,
    })];
    let (mut t, mut seq, mut fence, mut fault) = (0u64, 0u64, 0u64, 0u64);
    while h.len() < n {
        fence += 1;
        let node = format!("n{}", fence % 3 + 1);
        let token = format!("{node}/1/{fence}/x");
        let ev = |h: &mut Vec<HistoryLine>, t: &mut u64, kind| {
            *t += 100_000;
            let event = NodeEvent { mono_ns: *t, round: fence, kind };
            h.push(HistoryLine::Node { node: node.clone(), incarnation: 1, received_ns: *t, event });
        };
        ev(&mut h, &mut t, EventKind::Acquired { token: token.clone(), fence });
        for number in 1..=7u8 {
            ev(&mut h, &mut t, EventKind::CheckpointPassed { token: token.clone(), number });
            ev(
                &mut h,
                &mut t,
                EventKind::StoreCallSent { token: token.clone(), fence, op: StoreOp::Upsert, call: u64::from(number) },
            );
            seq += 1;
            t += 100_000;
            let stale = fence % 10 == 0 && number == 7;
            h.push(HistoryLine::Audit(AuditRecord {
                seq,
                mono_ns: t,
                tenant: "t".into(),
                node: node.clone(),
                token: token.clone(),
                fence: if stale { fence - 1 } else { fence },
                op: if number == 5 { StoreOp::SwitchAlias } else { StoreOp::Upsert },
                collection: Some(format!("c{fence}")),
                accepted: !stale,
                reason: stale.then(|| "stale fence".into()),
                alias_version: (number == 5).then_some(fence),
                call: u64::from(number),
            }));
            ev(&mut h, &mut t, EventKind::StoreCallAcked { token: token.clone(), call: u64::from(number) });
        }
        if fence % 7 == 0 {
            ev(
                &mut h,
                &mut t,
                EventKind::OwnershipLost { token: token.clone(), reason: "expired".into(), checkpoint: Some(3) },
            );
        }
        t += 100_000;
        h.push(HistoryLine::Observer(ObserverSample {
            instance: "redis-primary".into(),
            at_ns: t,
            holder: Some(token.clone()),
            ttl_ms: Some(900),
            role: Some("master".into()),
            error: None,
        }));
        if fence % 50 == 0 {
            fault += 1;
            for phase in [FaultPhase::Requested, FaultPhase::Verified, FaultPhase::Healed] {
                t += 100_000;
                h.push(HistoryLine::Fault(FaultEvent {
                    id: fault,
                    fault: "pause_node".into(),
                    target: node.clone(),
                    phase,
                    at_ns: t,
                    detail: String::new(),
                }));
            }
        }
    }
    h.push(HistoryLine::Snapshot(Snapshot {
        ended_ns: t + 1,
        faults_still_applied: vec![],
        temporary_collections_left: vec![],
        versions: Default::default(),
    }));
    h
}
