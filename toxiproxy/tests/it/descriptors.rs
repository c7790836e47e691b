//! The descriptor budget: links past the pool are closed at once, their places come back when
//! they close, and the API keeps answering whatever the proxies carry, in-process and in the real
//! binary under a low open-file limit.

use std::time::Duration;

use leasequake_toxiproxy::descriptors::Descriptors;
use leasequake_toxiproxy::{Client, Collection};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

use crate::support::echo;

async fn call(c: &Client, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let (status, text) = c.request(method, path, body.map(|b| b.to_string())).await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

/// Creates proxy `p` to `upstream`; returns where it listens.
async fn echo_proxy(client: &Client, upstream: &str) -> String {
    let body = json!({"name": "p", "listen": "127.0.0.1:0", "upstream": upstream});
    let (status, p) = call(client, "POST", "/proxies", Some(body)).await;
    assert_eq!(status, 201, "{p}");
    p["listen"].as_str().unwrap().to_owned()
}

/// Whether the proxy closed `c` without a byte (refused) rather than carrying an echo.
async fn refused(c: &mut TcpStream) -> bool {
    let _ = c.write_all(b"ping").await;
    let mut buf = [0u8; 4];
    matches!(tokio::time::timeout(Duration::from_secs(10), c.read(&mut buf)).await, Ok(Ok(0) | Err(_)))
}

async fn echoes(c: &mut TcpStream) -> bool {
    let mut buf = [0u8; 4];
    c.write_all(b"ping").await.is_ok()
        && matches!(tokio::time::timeout(Duration::from_secs(10), c.read_exact(&mut buf)).await, Ok(Ok(4)))
}

#[tokio::test]
async fn links_past_the_pool_are_closed_at_once_and_their_places_come_back() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let api = listener.local_addr().unwrap().to_string();
    let cancel = CancellationToken::new();
    // One listener and three links.
    let collection = std::sync::Arc::new(Collection::with_descriptors(7, Descriptors::new(1 + 2 * 3)));
    let server = tokio::spawn(leasequake_toxiproxy::api::serve(listener, collection, cancel.clone()));
    let client = Client::new(api);
    let (up, _stop) = echo().await;
    let listen = echo_proxy(&client, &up.to_string()).await;
    let mut held = Vec::new();
    for _ in 0..3 {
        let mut c = TcpStream::connect(&listen).await.unwrap();
        assert!(echoes(&mut c).await);
        held.push(c);
    }
    let mut extra = TcpStream::connect(&listen).await.unwrap();
    assert!(refused(&mut extra).await, "a fourth link had no places and was closed");
    // A second proxy's listener has no place either: refused, naming the fix.
    let (status, err) = call(
        &client,
        "POST",
        "/proxies",
        Some(json!({"name": "q", "listen": "127.0.0.1:0", "upstream": up.to_string()})),
    )
    .await;
    assert_eq!(status, 500, "{err}");
    assert!(err["error"].as_str().unwrap().contains("ulimit -n"), "{err}");
    // The API answers; the held links still carry.
    assert_eq!(call(&client, "GET", "/version", None).await.0, 200);
    assert!(echoes(&mut held[2]).await);
    // A closed link's places come back (polled: the proxy notices the close on its next read).
    drop(held.remove(0));
    let mut again = false;
    for _ in 0..100 {
        let mut c = TcpStream::connect(&listen).await.unwrap();
        if echoes(&mut c).await {
            again = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(again, "a link's places were not given back when it closed");
    cancel.cancel();
    server.await.unwrap();
}

/// The real server under `ulimit -n 1024`; returns it and its API address.
async fn binary_with_low_limit() -> (tokio::process::Child, String) {
    let mut child = tokio::process::Command::new("sh")
        .args(["-c", r#"ulimit -n 1024 && exec "$0" -host 127.0.0.1 -port 0"#, env!("CARGO_BIN_EXE_toxiproxy-server")])
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(rest) = line.split("address=").nth(1).filter(|_| line.contains("API listening")) {
                return rest.split_whitespace().next().unwrap().to_owned();
            }
        }
        panic!("the server ended before listening");
    })
    .await
    .expect("the server listened within 30 s");
    // Keep draining its log so it never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, addr)
}

#[tokio::test]
async fn the_real_server_answers_through_15_loop_attempts_and_more_links_than_its_limit_allows() {
    let (_server, api) = binary_with_low_limit().await;
    let client = Client::new(api.clone());
    let port = api.rsplit_once(':').unwrap().1;
    let loops = [
        "127.0.0.1",
        "127.1",
        "[::ffff:127.0.0.1]",
        "localhost",
        "localhost.",
        "0",
        "2130706433",
        "0x7f.1",
        "0x7f000001",
        "017700000001",
        "127.0.1",
        "0.0.0.0",
        "[::ffff:7f00:1]",
        "LOCALHOST",
        "ip6-localhost",
    ];
    for (i, host) in loops.iter().enumerate() {
        let body = json!({"name": format!("loop{i}"), "listen": "127.0.0.1:0", "upstream": format!("{host}:{port}")});
        let (status, err) = call(&client, "POST", "/proxies", Some(body)).await;
        assert_eq!(status, 400, "upstream {host}:{port} (the API) was accepted: {err}");
    }
    let (up, _stop) = echo().await;
    let listen = echo_proxy(&client, &up.to_string()).await;
    // 300 idle links, then 300 more: two descriptors each, past what 1024 allows after the
    // API's reserve. Before the pool, the server's accept failed with EMFILE and the API with it.
    let mut held = Vec::new();
    for _ in 0..600 {
        held.push(TcpStream::connect(&listen).await.unwrap());
    }
    assert!(echoes(&mut held[0]).await, "an early link carries");
    // Fifty clients of the API at once, each keeping its connection: all answered from the
    // API's reserve (without it the links left one descriptor, so one client at a time).
    let mut api_clients = Vec::new();
    for _ in 0..50 {
        api_clients.push(TcpStream::connect(&api).await.unwrap());
    }
    for (i, c) in api_clients.iter_mut().enumerate() {
        let answer = tokio::time::timeout(Duration::from_secs(3), async {
            c.write_all(b"GET /version HTTP/1.1\r\nHost: x\r\n\r\n").await?;
            let mut head = [0u8; 12];
            c.read_exact(&mut head).await.map(|_| head)
        })
        .await;
        assert!(
            matches!(&answer, Ok(Ok(h)) if h.starts_with(b"HTTP/1.1 200")),
            "API client {i} of 50 was not answered with the links holding every other descriptor: {answer:?}"
        );
    }
    let mut closed = 0;
    for c in &mut held[300..] {
        if refused(c).await {
            closed += 1;
        }
    }
    assert!(closed > 0, "every one of 600 links was carried under a limit of 1024 descriptors");
    assert_eq!(call(&client, "GET", "/proxies/p", None).await.0, 200);
}
