//! A simulated node's world: the virtual clock, a link to the model Redis and to the store (each
//! way a fixed latency for now), renewal behind the node's gates, owner tokens drawn from the seed.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::ConnectionLike;
use redis::{Cmd, Pipeline, RedisFuture, Value};
use redis_lease::{LeaseError, OwnerToken, TokenSource};
use tokio::time::Instant;

use super::cluster::Cluster;
use super::gate::{Gate, GatedSpawner, Tasks};
use super::net::{redis_request, store_link, Link};
use super::witness::Witness;
use crate::job::{NodeEnv, StoreFailure};
use crate::store::Store;
use leasequake_reports::wire::{http_request, WireReply};

/// Where the virtual clock starts on the nodes' monotonic axis, ns (stamps are never 0).
const BASE_NS: u64 = 1_000_000_000;
/// Where the Redis instances' wall clocks start, ms since the epoch (2026-06-01).
pub(super) const BASE_UNIX_MS: u64 = 1_780_272_000_000;

/// The virtual clock, read as every source in the history reads it.
#[derive(Debug, Clone, Copy)]
pub(super) struct VClock {
    t0: Instant,
}

impl VClock {
    pub fn start() -> Self {
        Self { t0: Instant::now() }
    }

    /// Now on the monotonic axis, ns.
    pub fn now_ns(&self) -> u64 {
        self.at_ns(Instant::now())
    }

    /// `at` on the monotonic axis, ns.
    pub fn at_ns(&self, at: Instant) -> u64 {
        BASE_NS.saturating_add(u64::try_from(at.saturating_duration_since(self.t0).as_nanos()).unwrap_or(u64::MAX))
    }

    /// A Redis instance's wall clock now, ms.
    pub fn unix_ms(&self) -> u64 {
        BASE_UNIX_MS.saturating_add(u64::try_from(self.t0.elapsed().as_millis()).unwrap_or(u64::MAX))
    }

    /// A stamp function for the store and the emitters.
    pub fn stamp(self) -> Arc<dyn Fn() -> u64 + Send + Sync> {
        Arc::new(move || self.now_ns())
    }
}

/// One node's world.
pub(super) struct SimEnv {
    pub clock: VClock,
    pub redis: Arc<Cluster>,
    pub store: Arc<Store>,
    /// The node's link to Redis.
    pub redis_link: Arc<Link>,
    /// The node's link to the store.
    pub store_link: Arc<Link>,
    /// SIGSTOP and SIGCONT of the node.
    pub node_gate: Arc<Gate>,
    /// `stall_renewal`.
    pub renewal_gate: Arc<Gate>,
    /// The incarnation's background tasks (renewal).
    pub tasks: Arc<Tasks>,
    /// Each way, on every link.
    pub latency: Duration,
    /// The incarnation's token nonce, from the seed.
    pub nonce: u64,
    /// What the node sends and gets back on its links.
    pub witness: Arc<Witness>,
    /// The node's name (its links are `<node>-redis`, `<node>-store`, `<node>-model`).
    pub node: String,
}

impl NodeEnv for SimEnv {
    type Conn = SimConn;
    type Tokens = SimTokens;

    fn now_ns(&self) -> u64 {
        self.clock.now_ns()
    }

    fn instant_ns(&self, at: Instant) -> u64 {
        self.clock.at_ns(at)
    }

    async fn connect(&self) -> Result<SimConn, String> {
        Ok(SimConn {
            link: self.redis_link.clone(),
            redis: self.redis.clone(),
            latency: self.latency,
            witness: (self.witness.clone(), format!("{}-redis", self.node)),
        })
    }

    fn renewal(&self) -> impl redis_lease::Spawn {
        GatedSpawner { gates: vec![self.node_gate.clone(), self.renewal_gate.clone()], tasks: self.tasks.clone() }
    }

    fn stall_renewal(&self, ms: u64) {
        self.renewal_gate.shut_until(Instant::now() + Duration::from_millis(ms));
    }

    async fn model(&self, body: String) -> Result<(u16, String), StoreFailure> {
        // The model link adds no latency: a call takes the model's work alone, as the truth
        // batches' rounds did when the node made its model calls itself.
        let link = format!("{}-model", self.node);
        let sent = self.witness.sent(&link, http_request("POST", "/v1/embed", body.as_bytes()), true);
        let (status, text) = crate::model::embed(self.store.model(), body.as_bytes()).await;
        self.witness.answered(&sent, WireReply::Http { status }, true);
        Ok((status, text))
    }

    async fn store(
        &self,
        method: &'static str,
        path: String,
        body: Option<String>,
    ) -> Result<(u16, String), StoreFailure> {
        let request = http_request(method, &path, body.as_deref().unwrap_or_default().as_bytes());
        let link = format!("{}-store", self.node);
        let extra = match store_link(&self.store_link) {
            Ok(extra) => extra,
            Err(true) => {
                self.witness.sent(&link, request, false);
                // A refused connection also takes a round trip (see `net::redis_request`).
                tokio::time::sleep(2 * self.latency).await;
                return Err(StoreFailure::NotDelivered("connection reset by peer".into()));
            }
            Err(false) => {
                self.witness.sent(&link, request, false);
                return std::future::pending().await;
            }
        };
        let sent = self.witness.sent(&link, request, true);
        let (store, latency, witness) = (self.store.clone(), self.latency + extra, self.witness.clone());
        // On the wire: the world's task, which the sender's crash does not cancel.
        let travel = tokio::spawn(async move {
            tokio::time::sleep(latency).await;
            let (path, query) = path.split_once('?').map_or((path.as_str(), None), |(p, q)| (p, Some(q)));
            let (status, text, _) =
                crate::store::route(&store, method, path, query, body.unwrap_or_default().as_bytes());
            tokio::time::sleep(latency).await;
            witness.answered(&sent, WireReply::Http { status }, true);
            (status, text)
        });
        travel.await.map_err(|_| StoreFailure::NoAnswer("the simulation ended".into()))
    }

    fn tokens(&self, node: &str, incarnation: u64) -> Result<SimTokens, LeaseError> {
        Ok(SimTokens { prefix: format!("{node}/{incarnation}"), nonce: self.nonce, seq: Mutex::new(0) })
    }
}

/// A node's Redis link: the request travels, runs atomically on the primary, the reply travels
/// (see `net`).
#[derive(Clone)]
pub(super) struct SimConn {
    link: Arc<Link>,
    redis: Arc<Cluster>,
    latency: Duration,
    witness: (Arc<Witness>, String),
}

impl SimConn {
    async fn send(&self, cmd: &Cmd) -> Result<Value, redis::RedisError> {
        let args = super::redis::conn::args(cmd);
        redis_request(self.link.clone(), self.redis.clone(), args, self.latency, Some(self.witness.clone())).await
    }
}

impl ConnectionLike for SimConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(self.send(cmd))
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let mut replies = Vec::new();
            for c in pipeline.cmd_iter() {
                replies.push(self.send(c).await?);
            }
            Ok(replies.into_iter().skip(offset).take(count).collect())
        })
    }

    fn get_db(&self) -> i64 {
        0
    }
}

/// Owner tokens as the production source makes them (node, incarnation, sequence, nonce), the
/// nonce drawn from the seed.
pub(super) struct SimTokens {
    prefix: String,
    nonce: u64,
    seq: Mutex<u64>,
}

impl TokenSource for SimTokens {
    fn next_token(&self) -> OwnerToken {
        let mut seq = self.seq.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let token = format!("{}/{}/{:016x}", self.prefix, *seq, self.nonce);
        *seq += 1;
        OwnerToken::from_string(token)
    }
}
