//! The environment on real containers: ready, replicating, reachable through the proxy, failing
//! over, and leaving nothing behind.

use std::time::{Duration, Instant};

use leasequake::docker;
use leasequake::env::{remove_labelled, EnvConfig, Environment, LABEL_RUN, PROXY_PORT_BASE};
use leasequake::image::{ensure, ImageSpec};
use leasequake_toxiproxy::Client;

async fn config(d: &testcontainers::bollard::Docker) -> EnvConfig {
    EnvConfig {
        nodes: 2,
        down_after_ms: 1000,
        failover_timeout_ms: 3000,
        ready_timeout: Duration::from_secs(30),
        origin: "test",
        redis_image: ensure(d, &ImageSpec::redis().unwrap()).await.unwrap(),
        proxy_image: ensure(d, &ImageSpec::proxy().unwrap()).await.unwrap(),
        store_image: ensure(d, &ImageSpec::store().unwrap()).await.unwrap(),
    }
}

/// Polls `cond` every 50 ms for at most `limit`; the awaited state is the event.
async fn within(limit: Duration, mut cond: impl AsyncFnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if cond().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

fn labelled(run: &str) -> usize {
    let filter = format!("label={LABEL_RUN}={run}");
    let count = |args: &[&str]| {
        let out = std::process::Command::new("docker").args(args).arg(&filter).output().unwrap();
        String::from_utf8_lossy(&out.stdout).split_whitespace().count()
    };
    count(&["ps", "-aq", "--filter"]) + count(&["network", "ls", "-q", "--filter"])
}

#[tokio::test]
async fn the_environment_comes_up_replicates_reaches_redis_through_the_proxy_fails_over_and_leaves_nothing() {
    let d = docker::connect().await.unwrap();
    let cfg = config(&d).await;
    let env = Environment::up(d.clone(), &cfg).await.unwrap();
    let run = env.run_id.clone();
    eprintln!("environment ready in {:?}", env.ready_in);
    assert_eq!(labelled(&run), 9, "7 containers and 2 networks, all labelled with the run");

    // Replication.
    env.redis_cli("redis-primary", &["SET", "k", "v"]).await.unwrap();
    assert!(
        within(Duration::from_secs(5), async || env
            .redis_cli("redis-replica", &["GET", "k"])
            .await
            .unwrap_or_default()
            .trim()
            == "v")
        .await
    );

    // A node's Redis proxy, from the host, with the run's password.
    let proxy = Client::new(env.proxy_api.clone());
    proxy.create_proxy("n1-redis", &format!("0.0.0.0:{PROXY_PORT_BASE}"), "redis-primary:6379").await.unwrap();
    let url = format!("redis://:{}@127.0.0.1:{}/", env.redis_password(), env.proxy_ports[0]);
    let mut conn = redis::Client::open(url).unwrap().get_multiplexed_async_connection().await.unwrap();
    let got: Option<String> = redis::cmd("GET").arg("k").query_async(&mut conn).await.unwrap();
    assert_eq!(got.as_deref(), Some("v"));

    // Sentinel failover: pause the primary, the replica is promoted.
    d.pause_container(env.container("redis-primary").unwrap()).await.unwrap();
    let t = Instant::now();
    let promoted = within(Duration::from_secs(20), async || {
        env.redis_cli("redis-replica", &["ROLE"]).await.unwrap_or_default().starts_with("master")
    })
    .await;
    eprintln!("failover took {:?}", t.elapsed());
    d.unpause_container(env.container("redis-primary").unwrap()).await.unwrap();
    assert!(promoted, "the replica was not promoted within 20 s");

    env.down().await.unwrap();
    assert_eq!(labelled(&run), 0, "down leaves no labelled object of the run");
}

#[tokio::test]
async fn a_dropped_environment_is_removed_and_cleanup_spares_live_runs() {
    let d = docker::connect().await.unwrap();
    let cfg = config(&d).await;
    let env = Environment::up(d.clone(), &cfg).await.unwrap();
    let run = env.run_id.clone();
    // Our own process is alive: "only dead" cleanup must not touch this run.
    remove_labelled(&d, None, true).await.unwrap();
    assert_eq!(labelled(&run), 9, "cleanup of dead runs spared a live one");
    drop(env); // the Drop backstop (a panic, an early return)
    assert_eq!(labelled(&run), 0, "a dropped environment leaves nothing");
}
