//! `cargo bench -p leasequake --bench env`: image build time (from nothing and when unchanged) and
//! the environment's time from start to ready, against the targets (build <= 30 s, ready <= 3 s).
//! Removes and rebuilds the project's images. Prints figures; asserts nothing. Run `cargo build --bins`
//! first and point LEASEQUAKE_TOXIPROXY_BIN and LEASEQUAKE_BIN at the binaries (the bench runs from
//! target/release, where they are not built).

use std::time::{Duration, Instant};

use leasequake::env::{EnvConfig, Environment};
use leasequake::image::{ensure, remove_all, ImageSpec};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let docker = leasequake::docker::connect().await.expect("docker");
    leasequake::env::remove_labelled(&docker, None, true).await.expect("cleanup");
    let _ = remove_all(&docker).await;
    let t = Instant::now();
    let redis = ensure(&docker, &ImageSpec::redis().expect("redis spec")).await.expect("redis image");
    let proxy = ensure(&docker, &ImageSpec::proxy().expect("proxy spec")).await.expect("proxy image");
    let store = ensure(&docker, &ImageSpec::store().expect("store spec")).await.expect("store image");
    let built = t.elapsed();
    let t = Instant::now();
    for spec in [ImageSpec::redis(), ImageSpec::proxy(), ImageSpec::store()] {
        ensure(&docker, &spec.expect("spec")).await.expect("image");
    }
    let reused = t.elapsed();
    println!(
        "images: built from nothing in {:.2} s (target <= 30 s, ratio {:.3}); unchanged, checked in {:.2} s",
        built.as_secs_f64(),
        built.as_secs_f64() / 30.0,
        reused.as_secs_f64()
    );
    let cfg = EnvConfig {
        nodes: 3,
        down_after_ms: 1000,
        failover_timeout_ms: 3000,
        ready_timeout: Duration::from_secs(30),
        origin: "bench",
        store_policy: leasequake_reports::history::StorePolicy::Enforce,
        redis_image: redis,
        proxy_image: proxy,
        store_image: store,
    };
    let mut ready = Vec::new();
    for _ in 0..5 {
        let env = Environment::up(docker.clone(), &cfg).await.expect("environment");
        ready.push(env.ready_in);
        env.down().await.expect("down");
    }
    ready.sort();
    let median = ready[ready.len() / 2].as_secs_f64();
    let all: Vec<String> = ready.iter().map(|d| format!("{:.2}", d.as_secs_f64())).collect();
    println!(
        "environment start to ready: median {median:.2} s of 5 [{}] (target <= 3 s, ratio {:.2})",
        all.join(" "),
        median / 3.0
    );
}
