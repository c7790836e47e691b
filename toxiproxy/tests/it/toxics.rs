//! Each toxic's effect on real TCP traffic through the proxy.

use std::time::{Duration, Instant};

use leasequake_toxiproxy::{Stream, ToxicSpec};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::{echo, read_within, round_trip, ReadEnd, Server};

async fn setup() -> (Server, String, tokio_util::sync::CancellationToken) {
    let s = Server::start().await;
    let (up, stop) = echo().await;
    let p = s.client.create_proxy("p", "127.0.0.1:0", &up.to_string()).await.unwrap();
    (s, p.listen, stop)
}

#[tokio::test]
async fn with_no_toxics_bytes_pass_unchanged() {
    let (s, listen, _stop) = setup().await;
    let mut c = TcpStream::connect(&listen).await.unwrap();
    let msg: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    let (mut r, mut w) = c.split();
    let (sent, got) = tokio::join!(w.write_all(&msg), async {
        let mut back = vec![0u8; msg.len()];
        r.read_exact(&mut back).await.map(|_| back)
    });
    sent.unwrap();
    assert_eq!(got.unwrap(), msg);
    s.stop().await;
}

#[tokio::test]
async fn a_half_close_still_carries_the_answer_back() {
    // The client closes its sending side; the upstream answers after reading to the end.
    let s = Server::start().await;
    let sink = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let up = sink.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut conn, _) = sink.accept().await.unwrap();
        let mut all = Vec::new();
        conn.read_to_end(&mut all).await.unwrap();
        conn.write_all(format!("got {}", all.len()).as_bytes()).await.unwrap();
    });
    let p = s.client.create_proxy("p", "127.0.0.1:0", &up.to_string()).await.unwrap();
    let mut c = TcpStream::connect(&p.listen).await.unwrap();
    c.write_all(&[0u8; 1000]).await.unwrap();
    c.shutdown().await.unwrap();
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(3), c.read_to_string(&mut answer)).await.unwrap().unwrap();
    assert_eq!(answer, "got 1000");
}

#[tokio::test]
async fn latency_adds_at_least_the_asked_delay_also_to_open_connections() {
    let (s, listen, _stop) = setup().await;
    let mut c = TcpStream::connect(&listen).await.unwrap();
    round_trip(&mut c, b"warm").await.unwrap();
    s.client.add_toxic("p", &ToxicSpec::latency(Stream::Downstream, 150, 0)).await.unwrap();
    let t = Instant::now();
    round_trip(&mut c, b"ping").await.unwrap();
    let took = t.elapsed();
    assert!(took >= Duration::from_millis(150) && took < Duration::from_secs(3), "{took:?}");
    s.client.remove_toxic("p", "latency_downstream").await.unwrap();
    let t = Instant::now();
    round_trip(&mut c, b"ping").await.unwrap();
    assert!(t.elapsed() < Duration::from_millis(150), "removal applies at once: {:?}", t.elapsed());
}

#[tokio::test]
async fn timeout_zero_is_a_blackhole_that_holds_the_connection_until_removed() {
    let (s, listen, _stop) = setup().await;
    let mut c = TcpStream::connect(&listen).await.unwrap();
    s.client.add_toxic("p", &ToxicSpec::timeout(Stream::Upstream, 0)).await.unwrap();
    c.write_all(b"lost").await.unwrap();
    assert_eq!(read_within(&mut c, Duration::from_millis(300)).await, ReadEnd::Nothing, "data held, connection open");
    s.client.remove_toxic("p", "timeout_upstream").await.unwrap();
    assert_eq!(round_trip(&mut c, b"back").await.unwrap(), b"back", "the connection survived the blackhole");
}

#[tokio::test]
async fn timeout_closes_the_connection_after_its_timeout() {
    let (s, listen, _stop) = setup().await;
    s.client.add_toxic("p", &ToxicSpec::timeout(Stream::Downstream, 100)).await.unwrap();
    // Timed from before the connect: the proxy may accept it, and start its 100 ms, before the
    // connect returns here.
    let t = Instant::now();
    let mut c = TcpStream::connect(&listen).await.unwrap();
    let end = read_within(&mut c, Duration::from_secs(3)).await;
    assert!(matches!(end, ReadEnd::Eof | ReadEnd::Reset), "{end:?}");
    assert!(t.elapsed() >= Duration::from_millis(100), "{:?}", t.elapsed());
}

#[tokio::test]
async fn reset_peer_resets() {
    let (s, listen, _stop) = setup().await;
    let mut c = TcpStream::connect(&listen).await.unwrap();
    round_trip(&mut c, b"ok").await.unwrap();
    // Timed from before the toxic is added: the connection may see it (and start its 50 ms)
    // before the API's answer reaches this client, which on a loaded machine takes a while.
    let t = Instant::now();
    s.client.add_toxic("p", &ToxicSpec::reset_peer(Stream::Downstream, 50)).await.unwrap();
    // No write here: a write would consume the RST's error, and the read would then see EOF.
    assert_eq!(read_within(&mut c, Duration::from_secs(3)).await, ReadEnd::Reset);
    assert!(t.elapsed() >= Duration::from_millis(50), "{:?}", t.elapsed());
}

#[tokio::test]
async fn limit_data_closes_after_n_bytes() {
    let (s, listen, _stop) = setup().await;
    s.client.add_toxic("p", &ToxicSpec::limit_data(Stream::Downstream, 10)).await.unwrap();
    let mut c = TcpStream::connect(&listen).await.unwrap();
    c.write_all(&[7u8; 64]).await.unwrap();
    let mut got = Vec::new();
    let end = tokio::time::timeout(Duration::from_secs(3), c.read_to_end(&mut got)).await.unwrap();
    assert!(end.is_ok() || got.len() == 10, "{end:?}");
    assert_eq!(got.len(), 10);
}

#[tokio::test]
async fn bandwidth_limits_throughput() {
    let (s, listen, _stop) = setup().await;
    s.client.add_toxic("p", &ToxicSpec::bandwidth(Stream::Downstream, 100)).await.unwrap();
    let mut c = TcpStream::connect(&listen).await.unwrap();
    let t = Instant::now();
    round_trip(&mut c, &[1u8; 20_000]).await.unwrap();
    // 20 KB at 100 KB/s: at least 200 ms.
    assert!(t.elapsed() >= Duration::from_millis(200) && t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
}

#[tokio::test]
async fn disabling_refuses_connections_and_closes_open_ones() {
    let (s, listen, _stop) = setup().await;
    let mut open = TcpStream::connect(&listen).await.unwrap();
    round_trip(&mut open, b"ok").await.unwrap();
    s.client.set_enabled("p", false).await.unwrap();
    let end = read_within(&mut open, Duration::from_secs(3)).await;
    assert!(matches!(end, ReadEnd::Eof | ReadEnd::Reset), "{end:?}");
    assert!(TcpStream::connect(&listen).await.is_err(), "the listener is closed");
    s.client.set_enabled("p", true).await.unwrap();
    let mut again = TcpStream::connect(&listen).await.unwrap();
    assert_eq!(round_trip(&mut again, b"hi").await.unwrap(), b"hi", "re-enabling re-binds the same port");
}

#[tokio::test]
async fn changing_the_upstream_closes_open_connections_and_points_new_ones_elsewhere() {
    let (s, listen, _stop) = setup().await;
    let mut open = TcpStream::connect(&listen).await.unwrap();
    round_trip(&mut open, b"ok").await.unwrap();
    let (other, _stop2) = echo().await;
    let p = s.client.set_upstream("p", &other.to_string()).await.unwrap();
    assert_eq!(p.upstream, other.to_string());
    let end = read_within(&mut open, Duration::from_secs(3)).await;
    assert!(matches!(end, ReadEnd::Eof | ReadEnd::Reset), "{end:?}");
    let mut fresh = TcpStream::connect(&p.listen).await.unwrap();
    assert_eq!(round_trip(&mut fresh, b"hi").await.unwrap(), b"hi");
}

#[tokio::test]
async fn toxicity_zero_never_applies() {
    let (s, listen, _stop) = setup().await;
    s.client.add_toxic("p", &ToxicSpec::timeout(Stream::Upstream, 0).with_toxicity(0.0)).await.unwrap();
    let mut c = TcpStream::connect(&listen).await.unwrap();
    assert_eq!(round_trip(&mut c, b"hi").await.unwrap(), b"hi");
}

#[tokio::test]
async fn slicer_and_slow_close_keep_the_bytes() {
    let (s, listen, _stop) = setup().await;
    let raw = |body: &str| s.client.request("POST", "/proxies/p/toxics", Some(body.to_owned()));
    assert_eq!(
        raw(r#"{"type":"slicer","attributes":{"average_size":3,"size_variation":1,"delay":100}}"#).await.unwrap().0,
        200
    );
    assert_eq!(raw(r#"{"type":"slow_close","stream":"upstream","attributes":{"delay":150}}"#).await.unwrap().0, 200);
    let mut c = TcpStream::connect(&listen).await.unwrap();
    let msg = b"the quick brown fox jumps over the lazy dog";
    assert_eq!(round_trip(&mut c, msg).await.unwrap(), msg);
    c.shutdown().await.unwrap();
    let t = Instant::now();
    assert_eq!(read_within(&mut c, Duration::from_secs(3)).await, ReadEnd::Eof);
    assert!(t.elapsed() >= Duration::from_millis(150), "close delayed: {:?}", t.elapsed());
}
