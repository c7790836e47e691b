//! A server on a free loopback port, an echo upstream, and small TCP helpers.

use std::net::SocketAddr;
use std::time::Duration;

use leasequake_toxiproxy::Client;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

pub struct Server {
    pub api: SocketAddr,
    pub client: Client,
    cancel: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Server {
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let api = listener.local_addr().unwrap();
        let cancel = CancellationToken::new();
        let task = leasequake_toxiproxy::spawn_server(listener, 7, cancel.clone());
        Self { api, client: Client::new(api.to_string()), cancel, task: Some(task) }
    }

    /// Stops the server and waits until every proxy is closed.
    pub async fn stop(mut self) {
        self.cancel.cancel();
        if let Some(t) = self.task.take() {
            t.await.unwrap();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// An upstream that echoes everything back; stops with the returned token.
pub async fn echo() -> (SocketAddr, CancellationToken) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    let token = stop.clone();
    tokio::spawn(async move {
        loop {
            let (mut s, _) = tokio::select! { () = token.cancelled() => return, a = listener.accept() => a.unwrap() };
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                while let Ok(n) = s.read(&mut buf).await {
                    if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (addr, stop)
}

/// Sends `msg` and reads the same number of bytes back.
pub async fn round_trip(s: &mut TcpStream, msg: &[u8]) -> std::io::Result<Vec<u8>> {
    s.write_all(msg).await?;
    let mut back = vec![0u8; msg.len()];
    s.read_exact(&mut back).await?;
    Ok(back)
}

/// What a read ends in within `limit`.
#[derive(Debug, PartialEq, Eq)]
pub enum ReadEnd {
    Data(usize),
    Eof,
    Reset,
    OtherError(String),
    Nothing,
}

pub async fn read_within(s: &mut TcpStream, limit: Duration) -> ReadEnd {
    let mut buf = [0u8; 4096];
    match tokio::time::timeout(limit, s.read(&mut buf)).await {
        Err(_) => ReadEnd::Nothing,
        Ok(Ok(0)) => ReadEnd::Eof,
        Ok(Ok(n)) => ReadEnd::Data(n),
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionReset => ReadEnd::Reset,
        Ok(Err(e)) => ReadEnd::OtherError(e.to_string()),
    }
}

/// A real `redis-server` on a free loopback port, no persistence; killed on drop.
pub struct Redis {
    pub addr: SocketAddr,
    child: std::process::Child,
}

impl Redis {
    pub async fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut child = std::process::Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("redis-server (scripts/deps installs it)");
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        for _ in 0..200 {
            if let Ok(mut s) = TcpStream::connect(addr).await {
                if command(&mut s, &["PING"]).await.starts_with(b"+PONG") {
                    return Self { addr, child };
                }
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("redis-server did not answer PING on {addr} within 2 s");
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sends one RESP command and reads its reply's first chunk.
pub async fn command(s: &mut TcpStream, args: &[&str]) -> Vec<u8> {
    let mut wire = format!("*{}\r\n", args.len());
    for a in args {
        wire.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    s.write_all(wire.as_bytes()).await.unwrap();
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf)).await.unwrap().unwrap();
    buf.truncate(n);
    buf
}
