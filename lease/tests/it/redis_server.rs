//! A real `redis-server` process on a free loopback port, killed on drop.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use redis_lease::{LeaseClient, LeaseConfig, UniqueTokens};

pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
    extra: Vec<String>,
}

impl RedisServer {
    pub fn start() -> anyhow::Result<Self> {
        Self::start_with(&[])
    }

    /// Starts a server with extra `--flag value` arguments.
    pub fn start_with(extra: &[&str]) -> anyhow::Result<Self> {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
        let dir = std::env::temp_dir().join(format!("leasequake-redis-{}-{}", std::process::id(), getrandom_u64()));
        std::fs::create_dir_all(&dir)?;
        let mut server = Self { child: None, port: 0, dir, extra: extra.iter().map(|s| (*s).to_owned()).collect() };
        // A free port can be taken between our probe and redis binding it: try a few.
        for _ in 0..5 {
            server.port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?.local_addr()?.port();
            if server.spawn().is_ok() {
                return Ok(server);
            }
        }
        bail!("redis-server did not start on any of 5 free ports")
    }

    fn spawn(&mut self) -> anyhow::Result<()> {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--dir", &self.dir.to_string_lossy()])
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("redis-server not found on PATH: install it with `apt-get install redis-server` (scripts/test does this)")?;
        self.child = Some(child);
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(5) {
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                self.child = None;
                bail!("redis-server exited at start-up with {status}");
            }
            if ping(self.port) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.kill();
        bail!("redis-server on port {} did not answer PING within 5 s", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Kills the server (SIGKILL, no persistence) and starts a fresh one on the same port.
    pub fn restart(&mut self) -> anyhow::Result<()> {
        self.kill();
        self.spawn()
    }

    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub async fn conn(&self) -> redis::aio::MultiplexedConnection {
        redis::Client::open(self.url()).unwrap().get_multiplexed_async_connection().await.unwrap()
    }

    pub async fn manager(&self) -> redis::aio::ConnectionManager {
        redis::Client::open(self.url()).unwrap().get_connection_manager().await.unwrap()
    }

    /// A lease client for `node` on its own connection.
    pub async fn client(&self, node: &str, config: LeaseConfig) -> LeaseClient<redis::aio::MultiplexedConnection> {
        LeaseClient::new(self.conn().await, config, UniqueTokens::new(node, 1).unwrap()).unwrap()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn ping(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect_timeout(&(Ipv4Addr::LOCALHOST, port).into(), Duration::from_millis(200)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
    let mut buf = [0u8; 7];
    s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
}

fn getrandom_u64() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(std::time::SystemTime::now())
}

/// Waits for `cond` to hold, checking every 5 ms, for at most `limit`. Returns whether it held.
/// Used to wait for an event observable only by reading Redis (a renewal, an expiry).
pub async fn eventually(limit: Duration, mut cond: impl AsyncFnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < deadline {
        if cond().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    cond().await
}

/// Kills every other client connection (`CLIENT KILL TYPE normal SKIPME yes`).
pub async fn kill_other_clients(admin: &mut redis::aio::MultiplexedConnection) {
    let _: () = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("normal")
        .arg("SKIPME")
        .arg("yes")
        .query_async(admin)
        .await
        .unwrap();
}
