//! docker-compose.yml runs with the installed `docker-compose` (the 1.29 line) and gives the same
//! topology by hand: Sentinels see the replica and each other, the proxy reaches Redis.

use std::process::Command;
use std::time::{Duration, Instant};

use leasequake::image::{ensure, ImageSpec};

fn compose(project: &str, args: &[&str]) -> (bool, String) {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let out = Command::new("docker-compose")
        .current_dir(root)
        .args(["-p", project])
        .args(args)
        .output()
        .expect("docker-compose is not installed (Debian: apt-get install docker-compose)");
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

/// Takes the compose project down even when the test fails.
struct Down(String);

impl Drop for Down {
    fn drop(&mut self) {
        let _ = compose(&self.0, &["down", "--timeout", "1"]);
    }
}

#[tokio::test]
async fn docker_compose_brings_up_the_same_topology_by_hand() {
    let d = leasequake::docker::connect().await.unwrap();
    for spec in [ImageSpec::redis(), ImageSpec::proxy(), ImageSpec::store()] {
        ensure(&d, &spec.unwrap()).await.unwrap();
    }
    let project = format!("lqtest{}", std::process::id());
    let (ok, out) = compose(&project, &["config", "-q"]);
    assert!(ok, "{out}");
    let _down = Down(project.clone());
    let (ok, out) = compose(&project, &["up", "-d"]);
    assert!(ok, "docker-compose up failed (are ports 8474, 7700, 20000-20008 free?): {out}");
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut sentinel = String::new();
    while Instant::now() < deadline {
        sentinel = compose(
            &project,
            &["exec", "-T", "sentinel-1", "redis-cli", "-p", "26379", "sentinel", "master", "leasequake"],
        )
        .1;
        let lines: Vec<&str> = sentinel.lines().collect();
        let get = |k: &str| lines.iter().position(|l| *l == k).and_then(|i| lines.get(i + 1)).copied();
        if get("num-slaves") == Some("1") && get("num-other-sentinels") == Some("2") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(sentinel.contains("num-other-sentinels\n2"), "Sentinels never saw each other: {sentinel}");
    let proxy = leasequake_toxiproxy::Client::new("127.0.0.1:8474");
    proxy.create_proxy("n1-redis", "0.0.0.0:20000", "redis-primary:6379").await.unwrap();
    let mut c = redis::Client::open("redis://:leasequake-dev@127.0.0.1:20000/")
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let pong: String = redis::cmd("PING").query_async(&mut c).await.unwrap();
    assert_eq!(pong, "PONG");

    // A scenario runs in it as it stands (`--env compose`), and passes.
    let reports = std::env::temp_dir().join(format!("leasequake-compose-{}", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_leasequake"))
        .args(["run", "scenarios/smoke/no-faults.toml", "--env", "compose", "--report-dir"])
        .arg(&reports)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .env("LEASEQUAKE_REDIS_PASSWORD", "leasequake-dev")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.starts_with("PASS"), "{stdout}");
    let _ = std::fs::remove_dir_all(reports);
}
