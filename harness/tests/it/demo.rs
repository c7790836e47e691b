use std::time::Duration;

use leasequake::demo::{run, DemoConfig};
use leasequake::local_redis::LocalRedis;
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn demo_workers_take_turns_and_fences_rise() {
    let redis = LocalRedis::start().await.unwrap();
    let cfg = DemoConfig {
        redis_url: redis.url(),
        workers: 3,
        tenant: "t".into(),
        ttl: Duration::from_millis(600),
        duration: Duration::from_millis(1500),
        step: Duration::from_millis(5),
    };
    let syncs = run(cfg, CancellationToken::new()).await.unwrap();
    assert!(syncs.len() >= 3, "{syncs:?}");
    assert!(syncs.windows(2).all(|w| w[0].fence < w[1].fence), "{syncs:?}");
    let workers: std::collections::BTreeSet<_> = syncs.iter().map(|s| s.worker).collect();
    assert!(workers.len() >= 2, "only {workers:?} ever synced");
    redis.stop().await;
}
