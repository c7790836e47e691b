//! The server driven by `toxiproxy_rust`, the ecosystem's (blocking) Rust client, as engineers'
//! existing scripts would drive the real Toxiproxy.

use std::time::{Duration, Instant};

use toxiproxy_rust::client::Client as Ecosystem;
use toxiproxy_rust::proxy::ProxyPack;

use crate::support::{echo, round_trip, Server};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ecosystem_client_populates_finds_toxifies_and_resets() {
    let s = Server::start().await;
    let (up, _stop) = echo().await;
    let api = s.api;
    let listen = {
        let free = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        free.local_addr().unwrap().to_string()
    };
    let upstream = up.to_string();
    let l = listen.clone();
    let (version, names) = tokio::task::spawn_blocking(move || {
        let eco = Ecosystem::new(api);
        assert!(eco.is_running());
        eco.populate(vec![ProxyPack::new("redis".into(), l, upstream)]).unwrap();
        let proxy = eco.find_proxy("redis").unwrap();
        proxy.with_latency("downstream".into(), 120, 0, 1.0);
        let version = eco.version().unwrap();
        let names: Vec<String> = eco.all().unwrap().into_keys().collect();
        (version, names)
    })
    .await
    .unwrap();
    assert!(version.contains("2.12.0"), "{version}");
    assert_eq!(names, vec!["redis".to_owned()]);

    let toxics = s.client.request("GET", "/proxies/redis/toxics", None).await.unwrap().1;
    assert!(toxics.contains("latency_downstream"), "{toxics}");
    let mut c = tokio::net::TcpStream::connect(&listen).await.unwrap();
    let t = Instant::now();
    round_trip(&mut c, b"hi").await.unwrap();
    assert!(t.elapsed() >= Duration::from_millis(120), "{:?}", t.elapsed());

    tokio::task::spawn_blocking(move || {
        let eco = Ecosystem::new(api);
        let proxy = eco.find_and_reset_proxy("redis").unwrap();
        proxy.disable().unwrap();
        proxy.enable().unwrap();
        eco.reset().unwrap();
        proxy.delete().unwrap();
    })
    .await
    .unwrap();
    assert_eq!(s.client.proxies().await.unwrap().len(), 0);
}
