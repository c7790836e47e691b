//! Starts Debian's `redis-server` as a child process on a free loopback port, for the demo and for
//! users without containers. Killed when dropped (and when the harness dies: `kill_on_drop`).
//! Does not configure replication or Sentinel: the chaos environment does that in containers.

use std::net::{Ipv4Addr, TcpListener};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

/// A running `redis-server` child.
pub struct LocalRedis {
    child: Child,
    port: u16,
}

impl LocalRedis {
    /// Starts `redis-server` with no persistence on a free port, and waits (at most 5 s) until it
    /// answers PING.
    pub async fn start() -> anyhow::Result<Self> {
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?.local_addr()?.port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .context("cannot start `redis-server`: install it (`apt-get install redis-server`) or pass --redis URL")?;
        let mut redis = Self { child, port };
        for _ in 0..500 {
            if let Some(status) = redis.child.try_wait()? {
                bail!("redis-server exited at start-up ({status}); is port {port} taken?");
            }
            if ping(port).await {
                return Ok(redis);
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        bail!("redis-server on port {port} did not answer PING within 5 s")
    }

    /// The URL to connect to.
    #[must_use]
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Kills the server and waits for it.
    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

async fn ping(port: u16) -> bool {
    let attempt = async {
        let mut s = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).await.ok()?;
        s.write_all(b"PING\r\n").await.ok()?;
        let mut buf = [0u8; 7];
        s.read_exact(&mut buf).await.ok()?;
        (&buf == b"+PONG\r\n").then_some(())
    };
    matches!(tokio::time::timeout(Duration::from_millis(200), attempt).await, Ok(Some(())))
}
