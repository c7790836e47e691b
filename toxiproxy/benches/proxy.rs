//! `cargo bench -p leasequake-toxiproxy`: added latency and throughput of the proxy with no
//! toxics, against a direct loopback connection measured in the same run. Prints figures and
//! ratios; asserts nothing (timings belong here, not in tests).
//! Anchor (Toxiproxy's README): < 100 µs added latency, ~1000 MB/s.

use std::time::{Duration, Instant};

use leasequake_toxiproxy::Client;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

const ROUND_TRIPS: usize = 5_000;
const VOLUME: usize = 512 << 20;

async fn echo_upstream() -> String {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            let _ = s.set_nodelay(true);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 64 << 10];
                while let Ok(n) = s.read(&mut buf).await {
                    if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

async fn sink_upstream() -> String {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 256 << 10];
                let mut total = 0usize;
                while let Ok(n) = s.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    total += n;
                }
                let _ = s.write_all(&(total as u64).to_le_bytes()).await;
            });
        }
    });
    addr
}

/// A renewal as a lease sends it: the witness parses, records and pairs it with its echo.
const RESP_COMMAND: &[u8] = b"*6\r\n$7\r\nEVALSHA\r\n$40\r\nd81a1ff9baed2d6983514c1f53e88979f24f4b55\r\n$1\r\n1\r\n$21\r\nleasequake:{t1}:lease\r\n$12\r\nn1/1/0/5f3a9\r\n$4\r\n1500\r\n";

async fn latencies(addr: &str, message: &[u8]) -> Vec<Duration> {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.set_nodelay(true).unwrap();
    let mut out = Vec::with_capacity(ROUND_TRIPS);
    let mut b = vec![0u8; message.len()];
    for _ in 0..ROUND_TRIPS {
        let t = Instant::now();
        s.write_all(message).await.unwrap();
        s.read_exact(&mut b).await.unwrap();
        out.push(t.elapsed());
    }
    out
}

async fn throughput(addr: &str) -> f64 {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let chunk = vec![7u8; 256 << 10];
    let t = Instant::now();
    let mut sent = 0;
    while sent < VOLUME {
        s.write_all(&chunk).await.unwrap();
        sent += chunk.len();
    }
    s.shutdown().await.unwrap();
    let mut total = [0u8; 8];
    s.read_exact(&mut total).await.unwrap();
    assert_eq!(u64::from_le_bytes(total) as usize, VOLUME);
    VOLUME as f64 / (1 << 20) as f64 / t.elapsed().as_secs_f64()
}

fn pct(v: &[Duration], p: f64) -> f64 {
    v[((v.len() as f64 - 1.0) * p) as usize].as_secs_f64() * 1e6
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let api = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let client = Client::new(api.local_addr().unwrap().to_string());
    let cancel = CancellationToken::new();
    let server = leasequake_toxiproxy::spawn_server(api, 1, cancel.clone());
    let (echo, sink) = (echo_upstream().await, sink_upstream().await);
    let pe = client.create_proxy("echo", "127.0.0.1:0", &echo).await.unwrap().listen;
    let ps = client.create_proxy("sink", "127.0.0.1:0", &sink).await.unwrap().listen;

    // Alternate direct and proxied rounds so warm-up and scheduling noise fall on both alike.
    // Raw bytes the witness cannot read (it stops recording the connection at once), then Redis
    // commands it records and pairs with their replies: the difference is the witness's cost.
    for (what, message) in [("16 B", &[1u8; 16][..]), ("a RESP command (witnessed)", RESP_COMMAND)] {
        let (mut direct, mut proxied) = (Vec::new(), Vec::new());
        for _ in 0..4 {
            direct.extend(latencies(&echo, message).await);
            proxied.extend(latencies(&pe, message).await);
        }
        direct.sort();
        proxied.sort();
        let (d50, p50, d99, p99) = (pct(&direct, 0.5), pct(&proxied, 0.5), pct(&direct, 0.99), pct(&proxied, 0.99));
        println!("round trip, 4 x {ROUND_TRIPS} x {what}   direct p50 {d50:.1} µs p99 {d99:.1} µs | proxied p50 {p50:.1} µs p99 {p99:.1} µs");
        println!(
            "added latency per round trip (two hops): p50 {:.1} µs, p99 {:.1} µs   (anchor: < 100 µs)   ratio p50 {:.2}x",
            p50 - d50,
            p99 - d99,
            p50 / d50
        );
    }
    let dt = throughput(&sink).await;
    let pt = throughput(&ps).await;
    println!(
        "throughput, {} MB one way   direct {dt:.0} MB/s | proxied {pt:.0} MB/s   (anchor: ~1000 MB/s)   ratio {:.2}",
        VOLUME >> 20,
        pt / dt
    );
    cancel.cancel();
    let _ = server.await;
}
