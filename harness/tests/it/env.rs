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
        ready_timeout: Duration::from_secs(60),
        origin: "test",
        store_policy: leasequake_reports::history::StorePolicy::Enforce,
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
    // Each Sentinel rewrites its config in memory: an fsync stall of its own, counted as the
    // primary's silence, failed a healthy primary over.
    for s in ["sentinel-1", "sentinel-2", "sentinel-3"] {
        let info = env.docker().inspect_container(env.container(s).unwrap(), None).await.unwrap();
        let tmpfs = info.host_config.and_then(|h| h.tmpfs).unwrap_or_default();
        assert!(tmpfs.contains_key("/data"), "{s}: /data is not a tmpfs: {tmpfs:?}");
    }

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
    // The old primary comes back and Sentinel demotes it: it rejoins as a replica.
    let t = Instant::now();
    let rejoined = within(Duration::from_secs(30), async || {
        env.redis_cli("redis-primary", &["ROLE"]).await.unwrap_or_default().starts_with("slave")
    })
    .await;
    eprintln!("old primary rejoined as a replica after {:?}", t.elapsed());
    assert!(rejoined, "the old primary did not rejoin as a replica within 30 s");

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

#[tokio::test]
async fn a_sigkilled_harness_leaves_its_environment_and_the_next_start_removes_only_that() {
    use std::io::{BufRead, BufReader};
    let d = docker::connect().await.unwrap();
    let ours = Environment::up(d.clone(), &config(&d).await).await.unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_leasequake"))
        .args(["env", "up", "--nodes", "1"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    let killed = first.split_whitespace().nth(1).unwrap().to_owned();
    assert!(first.contains("ready"), "{first}");
    child.kill().unwrap(); // SIGKILL: no Drop, no down
    child.wait().unwrap();
    assert_eq!(labelled(&killed), 9, "a SIGKILLed harness leaves its objects behind");
    remove_labelled(&d, None, true).await.unwrap();
    assert_eq!(labelled(&killed), 0, "the dead run's objects are removed");
    assert_eq!(labelled(&ours.run_id), 9, "the live run is untouched");
    ours.down().await.unwrap();
}

#[tokio::test]
async fn cutting_the_primary_from_replication_opens_the_split_brain_window() {
    use testcontainers::bollard::models::NetworkDisconnectRequest;
    let d = docker::connect().await.unwrap();
    let env = Environment::up(d.clone(), &config(&d).await).await.unwrap();
    let proxy = Client::new(env.proxy_api.clone());
    proxy.create_proxy("n1-redis", &format!("0.0.0.0:{PROXY_PORT_BASE}"), "redis-primary:6379").await.unwrap();
    let url = format!("redis://:{}@127.0.0.1:{}/", env.redis_password(), env.proxy_ports[0]);
    let req =
        NetworkDisconnectRequest { container: env.container("redis-primary").unwrap().to_owned(), force: Some(true) };
    d.disconnect_network(&env.network("repl"), req).await.unwrap();
    let promoted = within(Duration::from_secs(20), async || {
        env.redis_cli("redis-replica", &["ROLE"]).await.unwrap_or_default().starts_with("master")
    })
    .await;
    assert!(promoted, "Sentinel promoted the replica");
    // The old primary, still reachable by clients, still takes writes: two masters at once.
    let mut old = redis::Client::open(url).unwrap().get_multiplexed_async_connection().await.unwrap();
    let _: () = redis::cmd("SET").arg("lease").arg("stale-owner").query_async(&mut old).await.unwrap();
    let role = env.redis_cli("redis-primary", &["ROLE"]).await.unwrap();
    assert!(role.starts_with("master"), "the cut-off primary is still master: {role}");
    env.down().await.unwrap();
}

#[tokio::test]
async fn cutting_one_nodes_proxy_leaves_the_others_working() {
    let d = docker::connect().await.unwrap();
    let env = Environment::up(d.clone(), &config(&d).await).await.unwrap();
    let proxy = Client::new(env.proxy_api.clone());
    for (i, name) in ["n1-redis", "n2-redis"].iter().enumerate() {
        proxy
            .create_proxy(name, &format!("0.0.0.0:{}", PROXY_PORT_BASE + i as u16), "redis-primary:6379")
            .await
            .unwrap();
    }
    let ping = async |port: u16| -> Result<String, redis::RedisError> {
        let url = format!("redis://:{}@127.0.0.1:{port}/", env.redis_password());
        let mut c = redis::Client::open(url)?.get_multiplexed_async_connection().await?;
        redis::cmd("PING").query_async(&mut c).await
    };
    proxy.set_enabled("n1-redis", false).await.unwrap();
    assert!(
        tokio::time::timeout(Duration::from_secs(3), ping(env.proxy_ports[0])).await.map_or(true, |r| r.is_err()),
        "n1 is cut off"
    );
    assert_eq!(ping(env.proxy_ports[1]).await.unwrap(), "PONG", "n2 is not");
    env.down().await.unwrap();
}
