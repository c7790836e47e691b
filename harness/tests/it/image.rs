//! Images built locally and run on the real Docker engine (no registry).

use std::collections::HashMap;
use std::time::Duration;

use leasequake::docker::{self, LABEL_IMAGE, LABEL_MANAGED};
use leasequake::error::HarnessError;
use leasequake::image::{self, ImageSpec, PROXY_API_PORT};
use leasequake_toxiproxy::Client;
use testcontainers::bollard::models::{ContainerCreateBody, HostConfig, PortBinding};
use testcontainers::bollard::query_parameters::{CreateContainerOptionsBuilder, RemoveContainerOptionsBuilder};
use testcontainers::bollard::Docker;

/// Removes the container when dropped, even when the test panics (the normal path removes it
/// through the API first; this is the backstop, so it uses the docker CLI rather than async I/O).
struct RemoveOnDrop(String);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::process::Command::new("docker").args(["rm", "-f", &self.0]).output();
    }
}

/// Runs `image` with the proxy API published on a free loopback port; returns the container's
/// removal guard and the host port.
async fn run_proxy(docker: &Docker, image: &str, name: &str) -> (RemoveOnDrop, u16) {
    run(docker, image, name, None, PROXY_API_PORT).await
}

/// Runs `image` (with `cmd`, if given) with `port` published on a free loopback port.
async fn run(docker: &Docker, image: &str, name: &str, cmd: Option<Vec<String>>, port: u16) -> (RemoveOnDrop, u16) {
    let bindings = HashMap::from([(
        format!("{port}/tcp"),
        Some(vec![PortBinding { host_ip: Some("127.0.0.1".into()), host_port: Some(String::new()) }]),
    )]);
    let body = ContainerCreateBody {
        image: Some(image.into()),
        cmd,
        labels: Some(HashMap::from([(LABEL_MANAGED.to_owned(), "true".to_owned())])),
        host_config: Some(HostConfig { port_bindings: Some(bindings), ..Default::default() }),
        ..Default::default()
    };
    let options = CreateContainerOptionsBuilder::new().name(name).build();
    let id = docker.create_container(Some(options), body).await.unwrap().id;
    let guard = RemoveOnDrop(id.clone());
    docker.start_container(&id, None).await.unwrap();
    let info = docker.inspect_container(&id, None).await.unwrap();
    let port =
        info.network_settings.and_then(|n| n.ports).and_then(|p| p.get(&format!("{port}/tcp")).cloned().flatten());
    let port = port.and_then(|b| b.first().and_then(|b| b.host_port.clone())).unwrap().parse().unwrap();
    (guard, port)
}

#[tokio::test]
async fn the_proxy_image_builds_once_runs_and_answers_the_toxiproxy_api() {
    let docker = docker::connect().await.unwrap();
    let spec = ImageSpec::proxy().unwrap();
    let first = image::ensure(&docker, &spec).await.unwrap();
    let again = image::ensure(&docker, &spec).await.unwrap();
    assert_eq!(first.reference, again.reference, "same inputs, same tag");
    assert!(!again.rebuilt, "unchanged inputs are not rebuilt");
    let labels = docker.inspect_image(&first.stable).await.unwrap().config.and_then(|c| c.labels).unwrap();
    assert_eq!(labels.get(LABEL_MANAGED).map(String::as_str), Some("true"));
    assert_eq!(labels.get(LABEL_IMAGE).map(String::as_str), Some("toxiproxy"));

    let name = format!("leasequake-test-proxy-{}", std::process::id());
    let (container, port) = run_proxy(&docker, &first.reference, &name).await;
    let client = Client::new(format!("127.0.0.1:{port}")).with_timeout(Duration::from_secs(1));
    // Wait for the API to answer (the event), at most 10 s.
    let mut version = Err(None);
    for _ in 0..100 {
        match client.version().await {
            Ok(v) => {
                version = Ok(v);
                break;
            }
            Err(e) => version = Err(Some(e.to_string())),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let created = client.create_proxy("redis", "0.0.0.0:20000", "redis-primary:6379").await;
    docker
        .remove_container(&container.0, Some(RemoveContainerOptionsBuilder::new().force(true).build()))
        .await
        .unwrap();
    assert_eq!(version.unwrap(), "2.12.0");
    assert_eq!(created.unwrap().listen, "0.0.0.0:20000");
}

#[tokio::test]
async fn a_missing_docker_daemon_is_named_with_the_fix() {
    let err = docker::connect_socket("/nonexistent/docker.sock").await.unwrap_err();
    assert!(matches!(err, HarnessError::DockerUnavailable { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("Docker daemon") && msg.contains("DOCKER_HOST"), "{msg}");
}

/// Waits (at most 10 s) for `probe` to succeed: the container's service answering is the event.
async fn answered<T, E: std::fmt::Display>(mut probe: impl AsyncFnMut() -> Result<T, E>) -> T {
    let mut last = String::new();
    for _ in 0..100 {
        match probe().await {
            Ok(v) => return v,
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no answer within 10 s: {last}");
}

#[tokio::test]
async fn the_redis_image_serves_redis_behind_a_password_that_no_error_repeats() {
    let docker = docker::connect().await.unwrap();
    let built = image::ensure(&docker, &ImageSpec::redis().unwrap()).await.unwrap();
    let secret = "pw-4f9c2e";
    let cmd = ["/usr/bin/redis-server", "--protected-mode", "no", "--requirepass", secret].map(str::to_owned).to_vec();
    let name = format!("leasequake-test-redis-{}", std::process::id());
    let (_container, port) = run(&docker, &built.reference, &name, Some(cmd), 6379).await;
    let url = format!("redis://:{secret}@127.0.0.1:{port}/");
    let pong: String = answered(async || {
        let mut c = redis::Client::open(url.as_str())?.get_multiplexed_async_connection().await?;
        redis::cmd("PING").query_async::<String>(&mut c).await
    })
    .await;
    assert_eq!(pong, "PONG");
    let wrong = format!("redis://:wrong-{secret}@127.0.0.1:{port}/");
    let err = redis::Client::open(wrong.as_str()).unwrap().get_multiplexed_async_connection().await.err().unwrap();
    let shown = format!("{err} {err:?}");
    assert!(!shown.contains(secret), "the password leaked into an error: {shown}");
}

#[tokio::test]
async fn the_store_image_serves_the_store_api() {
    let docker = docker::connect().await.unwrap();
    let built = image::ensure(&docker, &ImageSpec::store().unwrap()).await.unwrap();
    let name = format!("leasequake-test-store-{}", std::process::id());
    let (_container, port) = run(&docker, &built.reference, &name, None, leasequake::image::STORE_PORT).await;
    let addr = format!("127.0.0.1:{port}");
    let (status, body) =
        answered(async || leasequake_toxiproxy::http::exchange(&addr, "GET", "/v1/health", None).await).await;
    assert_eq!((status, body.as_str()), (200, r#"{"audit_seq":0,"model_seq":0,"ok":true}"#));
}

#[tokio::test]
async fn doctor_says_all_is_well_here_and_names_the_fix_when_docker_is_missing() {
    let d = docker::connect().await.unwrap();
    for spec in [ImageSpec::redis(), ImageSpec::proxy(), ImageSpec::store()] {
        image::ensure(&d, &spec.unwrap()).await.unwrap();
    }
    let run = |host: Option<&str>| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_leasequake"));
        cmd.arg("doctor");
        if let Some(h) = host {
            cmd.env("DOCKER_HOST", h);
        }
        let out = cmd.output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let (code, out) = run(None);
    assert!(!out.contains("FIX   docker") && !out.contains("FIX   image") && !out.contains("FIX   address"), "{out}");
    // Only leftovers (of a test that SIGKILLs a harness, running alongside) may make it non-zero.
    assert!(code == Some(0) || out.contains("FIX   leftovers"), "{out}");
    let (code, out) = run(Some("unix:///nonexistent/docker.sock"));
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("FIX   docker") && out.contains("DOCKER_HOST"), "{out}");
}
