use std::time::Duration;

use leasequake::demo::{run, DemoConfig, Tally};
use leasequake::local_redis::LocalRedis;
use leasequake::supervisor::Received;
use leasequake_reports::history::{AuditRecord, EventKind, FenceSource, NodeEvent, StoreOp, StorePolicy};
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn demo_nodes_take_turns_and_every_acknowledged_write_is_in_the_audit_log() {
    let redis = LocalRedis::start().await.unwrap();
    let cfg = DemoConfig {
        redis_url: redis.url(),
        node_cmd: vec![env!("CARGO_BIN_EXE_leasequake").to_owned(), "node".to_owned()],
        nodes: 3,
        tenant: "t".into(),
        ttl: Duration::from_millis(600),
        duration: Duration::from_secs(3),
        policy: StorePolicy::Enforce,
        fence_source: FenceSource::Store,
    };
    let t = run(cfg, CancellationToken::new()).await.unwrap();
    assert!(t.healthy(), "{t:?}");
    assert!(t.syncs.len() >= 2, "only {:?} ever synced", t.syncs);
    redis.stop().await;
}

#[test]
fn the_tally_catches_an_acknowledged_write_missing_from_the_audit_log_and_falling_fences() {
    let event = |kind| Received {
        node: "n1".into(),
        incarnation: 1,
        received_ns: 0,
        line: Ok(NodeEvent { mono_ns: 0, round: 1, kind }),
    };
    let record = |seq, fence, call| AuditRecord {
        seq,
        mono_ns: 0,
        tenant: "t".into(),
        node: "n1".into(),
        token: "n1/1/0/x".into(),
        fence,
        op: StoreOp::SwitchAlias,
        collection: Some("c".into()),
        accepted: true,
        reason: None,
        alias_version: Some(seq),
        call,
    };
    let history = [
        event(EventKind::StoreCallAcked { token: "n1/1/0/x".into(), call: 1 }),
        event(EventKind::StoreCallAcked { token: "n1/1/0/x".into(), call: 2 }),
        event(EventKind::SyncFinished { token: "n1/1/0/x".into(), fence: 2, collection: "c".into() }),
    ];
    let good = Tally::of(&history, &[record(1, 1, 1), record(2, 2, 2)]);
    assert!(good.healthy(), "{good:?}");
    let missing = Tally::of(&history, &[record(1, 1, 1)]);
    assert_eq!(missing.unaccounted, [("n1".to_owned(), 2)]);
    assert!(!missing.healthy());
    let falling = Tally::of(&history, &[record(1, 2, 1), record(2, 1, 2)]);
    assert!(!falling.healthy(), "alias switched under a falling fence");
}
