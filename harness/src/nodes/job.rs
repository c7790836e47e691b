//! The reference node's job, the production tenant-sync pipeline, in whatever world it runs in:
//! each round acquires the lease; prepares; embeds in batches (model calls cost time); drops
//! temporary collections that aborted rounds left; creates a temporary collection; upserts;
//! switches the alias; persists the sync record; drops the old collection; releases.
//! `ensure_owned` runs at the seven checkpoints the configuration selects; a failed one cancels the
//! round at once. What the job needs of its world (clock stamps, Redis, the store, where renewal
//! runs, owner tokens) is a [`NodeEnv`]: the process node (`node`) gives it real ones, the
//! simulation (`sim`) virtual ones. One job, two worlds.
//!
//! Deliberately, only the long non-store work (prepare, model calls) is also cancelled by the
//! lease's `lost()`: between a passed checkpoint and its write the node does what production code
//! does, so a pause there shows what only fencing can stop.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use leasequake_reports::history::{
    checkpoint_name, EventKind, FenceSource, NodeCommand, NodeConfig, NodeEvent, StoreOp, CHECKPOINTS,
};
use redis::aio::ConnectionLike;
use redis_lease::{LeaseClient, LeaseConfig, LeaseError, LeaseEvent, LeaseGuard, Spawn, TokenSource};
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::store::op_path;

/// How a store exchange failed without an answer.
#[derive(Debug)]
pub enum StoreFailure {
    /// It never reached the store (connection refused or reset before sending).
    NotDelivered(String),
    /// Sent, but no usable answer came.
    NoAnswer(String),
}

/// What the job needs of the world it runs in.
pub trait NodeEnv: Send + Sync + 'static {
    /// A connection to Redis.
    type Conn: ConnectionLike + Clone + Send + Sync + 'static;
    /// Owner tokens.
    type Tokens: TokenSource;
    /// The node's monotonic clock now, ns: every event's stamp.
    fn now_ns(&self) -> u64;
    /// A tokio instant on that same axis (a decision's or a send's stamp).
    fn instant_ns(&self, at: tokio::time::Instant) -> u64;
    /// One attempt to connect to Redis, bounded by the caller.
    fn connect(&self) -> impl Future<Output = Result<Self::Conn, String>> + Send;
    /// Where the lease's renewal task runs.
    fn renewal(&self) -> impl Spawn;
    /// Holds renewal alone for `ms` (the `stall_renewal` command): the rest of the job runs on.
    fn stall_renewal(&self, ms: u64);
    /// One call to the model service (`POST /v1/embed`, protocol 4): status and body.
    fn model(&self, body: String) -> impl Future<Output = Result<(u16, String), StoreFailure>> + Send;
    /// One HTTP exchange with the store: status and body.
    fn store(
        &self,
        method: &'static str,
        path: String,
        body: Option<String>,
    ) -> impl Future<Output = Result<(u16, String), StoreFailure>> + Send;
    /// The owner tokens of incarnation `incarnation` of node `node`.
    fn tokens(&self, node: &str, incarnation: u64) -> Result<Self::Tokens, LeaseError>;
}

/// Sends events to whoever records them (the process's stdout writer, the simulation's history),
/// stamped with the node's monotonic clock and round.
#[derive(Clone)]
pub struct Emitter {
    tx: mpsc::Sender<NodeEvent>,
    /// The node's clock, ns.
    stamp: Arc<dyn Fn() -> u64 + Send + Sync>,
    round: Arc<AtomicU64>,
    /// One event at a time, from every thread (the renewal thread's loss included), so that a
    /// check-and-emit is atomic with respect to the loss event.
    order: Arc<std::sync::Mutex<()>>,
}

impl Emitter {
    /// An emitter into `tx`, stamping with `stamp`.
    pub fn new(tx: mpsc::Sender<NodeEvent>, stamp: Arc<dyn Fn() -> u64 + Send + Sync>) -> Self {
        Self { tx, stamp, round: Arc::new(AtomicU64::new(0)), order: Arc::default() }
    }

    /// Emits one event.
    pub fn emit(&self, kind: EventKind) {
        let _order = self.order.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        self.send(kind);
    }

    /// Emits `kind` only while `lost` is not cancelled, and says whether it did. The lease cancels
    /// `lost` before it announces the loss, and the announcement waits for this lock: so an event
    /// emitted here always comes before the loss event, and after the loss nothing is emitted.
    fn emit_unless_lost(&self, lost: &CancellationToken, kind: EventKind) -> bool {
        let _order = self.order.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if lost.is_cancelled() {
            return false;
        }
        self.send(kind);
        true
    }

    fn send(&self, kind: EventKind) {
        let event = NodeEvent { mono_ns: (self.stamp)(), round: self.round.load(Ordering::Relaxed), kind };
        if self.tx.try_send(event).is_err() {
            eprintln!("leasequake node: event queue full or closed; the harness is not reading");
        }
    }
}

/// How a round ended.
enum Outcome {
    Finished(String),
    Aborted { lost: bool, reason: String },
}

fn aborted(lost: bool, reason: impl Into<String>) -> Outcome {
    Outcome::Aborted { lost, reason: reason.into() }
}

/// A variant of the reference node: its name (reported in `hello`) and what it does to the lease
/// configuration. The production node is [`Variant::reference`]; the self-test build adds a flaw.
pub struct Variant {
    /// Shown in the `hello` event after the implementation's name, e.g. `flaw: non-sticky-loss`.
    pub label: Option<String>,
    /// Applied to the lease configuration the harness sent.
    pub configure: Box<dyn Fn(LeaseConfig) -> LeaseConfig + Send + Sync>,
}

impl Variant {
    /// The production node: the lease exactly as configured.
    #[must_use]
    pub fn reference() -> Self {
        Self { label: None, configure: Box::new(|c| c) }
    }
}

/// Runs the job on `config` until stopped: commands come from `commands` (the node protocol's,
/// after the config line), events go to `emitter`. Ends with `stopped`.
pub async fn run<E: NodeEnv>(
    env: Arc<E>,
    config: NodeConfig,
    emitter: Emitter,
    commands: impl Stream<Item = Result<NodeCommand, String>> + Send + Unpin + 'static,
    variant: Arc<Variant>,
) {
    let stop = CancellationToken::new();
    let started = CancellationToken::new();
    let (go_tx, go_rx) = mpsc::channel::<u8>(16);
    let slow_model = Arc::new(AtomicU64::new(0));
    let dispatcher = {
        let (stop, started, emitter, env) = (stop.clone(), started.clone(), emitter.clone(), env.clone());
        let slow_model = slow_model.clone();
        let mut commands = commands;
        tokio::spawn(async move {
            while let Some(command) = commands.next().await {
                match command {
                    Ok(NodeCommand::Start) => started.cancel(),
                    Ok(NodeCommand::Stop) => stop.cancel(),
                    Ok(NodeCommand::Go { checkpoint }) => {
                        let _ = go_tx.try_send(checkpoint);
                    }
                    Ok(NodeCommand::StallRenewal { ms }) => env.stall_renewal(ms),
                    Ok(NodeCommand::SlowModel { ms }) => slow_model.store(ms, Ordering::Relaxed),
                    Ok(NodeCommand::Config(_)) => {
                        emitter.emit(EventKind::Error { message: "a second config was ignored".into() })
                    }
                    Err(e) => emitter.emit(EventKind::Error { message: format!("unreadable command: {e}") }),
                }
            }
            stop.cancel(); // no more commands: the parent is gone
        })
    };
    tokio::select! {
        biased;
        () = started.cancelled() => {}
        () = stop.cancelled() => {}
    }
    if !stop.is_cancelled() {
        let parts = Parts { stop: stop.clone(), go: go_rx, slow_model, variant };
        Node::new(env, config, emitter.clone(), parts).run().await;
    }
    emitter.emit(EventKind::Stopped);
    dispatcher.abort();
}

/// What the dispatcher shares with the running job.
struct Parts {
    stop: CancellationToken,
    go: mpsc::Receiver<u8>,
    slow_model: Arc<AtomicU64>,
    variant: Arc<Variant>,
}

/// One held acquisition.
type Guard<E> = LeaseGuard<<E as NodeEnv>::Conn>;

struct Node<E: NodeEnv> {
    env: Arc<E>,
    cfg: NodeConfig,
    emitter: Emitter,
    stop: CancellationToken,
    go: mpsc::Receiver<u8>,
    /// Extra time per model call (the `slow_model` command).
    slow_model: Arc<AtomicU64>,
    /// The current acquisition's loss token: no store call starts once it is cancelled.
    lost: CancellationToken,
    call: u64,
    /// The store call sent and not yet answered, if any: reported unknown if the round dies.
    in_flight: Option<(String, u64)>,
    /// A sync point passed and not yet held at: the node holds before its next step.
    pending_sync: Option<(u8, String)>,
    variant: Arc<Variant>,
}

impl<E: NodeEnv> Node<E> {
    fn new(env: Arc<E>, cfg: NodeConfig, emitter: Emitter, parts: Parts) -> Self {
        let Parts { stop, go, slow_model, variant } = parts;
        Self {
            env,
            cfg,
            emitter,
            stop,
            go,
            slow_model,
            lost: CancellationToken::new(),
            call: 0,
            in_flight: None,
            pending_sync: None,
            variant,
        }
    }

    async fn run(mut self) {
        let Some(lease) = self.connect().await else { return };
        // Bounded by `stop`: every turn is one round (or one failed acquire).
        while !self.stop.is_cancelled() {
            self.emitter.round.fetch_add(1, Ordering::Relaxed);
            self.emitter.emit(EventKind::AcquireAttempt);
            let acquired = tokio::select! {
                biased;
                () = self.stop.cancelled() => break,
                g = lease.acquire(&self.cfg.tenant) => g,
            };
            let guard = match acquired {
                Ok(g) => g,
                Err(e) => {
                    self.emitter.emit(EventKind::AcquireTimedOut { reason: e.to_string() });
                    continue;
                }
            };
            let token = guard.token().to_string();
            let sent_ns = Some(self.env.instant_ns(guard.acquire_sent_at()));
            self.emitter.emit(EventKind::Acquired { token: token.clone(), fence: guard.fence(), sent_ns });
            let outcome = self.round(&guard, &token).await;
            if let Some((t, call)) = self.in_flight.take() {
                self.emitter.emit(EventKind::StoreCallUnknown {
                    token: t,
                    call,
                    detail: "the round ended before the answer".into(),
                });
            }
            match outcome {
                Outcome::Finished(collection) => {
                    self.emitter.emit(EventKind::SyncFinished {
                        token: token.clone(),
                        fence: guard.fence(),
                        collection,
                    });
                }
                Outcome::Aborted { lost, reason } => {
                    self.emitter.emit(EventKind::RoundAborted { token: token.clone(), lost, reason })
                }
            }
            let outcome = match guard.release().await {
                Ok(r) => format!("{r:?}").to_lowercase(),
                Err(e) => format!("error: {e}"),
            };
            self.emitter.emit(EventKind::Released { token, outcome });
            tokio::select! {
                biased;
                () = self.stop.cancelled() => {}
                () = tokio::time::sleep(Duration::from_millis(self.cfg.pipeline.pause_ms)) => {}
            }
        }
    }

    /// Connects to Redis (retrying until stopped) and builds the lease client.
    async fn connect(&self) -> Option<LeaseClient<E::Conn>> {
        let l = &self.cfg.lease;
        let config = (self.variant.configure)(
            LeaseConfig::scaled(Duration::from_millis(l.ttl_ms))
                .with_renew_interval(Duration::from_millis(l.renew_ms))
                .with_acquire_wait(Duration::from_millis(l.acquire_wait_ms))
                .with_command_timeout(Duration::from_millis(l.command_timeout_ms)),
        );
        // Bounded by `stop`.
        loop {
            let conn = tokio::select! {
                biased;
                () = self.stop.cancelled() => return None,
                c = tokio::time::timeout(Duration::from_millis(l.ttl_ms.max(1000)), self.env.connect()) => c,
            };
            match conn {
                Ok(Ok(conn)) => return self.client(conn, config),
                Ok(Err(e)) => self.emitter.emit(EventKind::Error { message: format!("cannot connect to Redis: {e}") }),
                Err(_) => self.emitter.emit(EventKind::Error { message: "cannot connect to Redis: timed out".into() }),
            }
            tokio::select! {
                biased;
                () = self.stop.cancelled() => return None,
                () = tokio::time::sleep(Duration::from_millis(500)) => {}
            }
        }
    }

    /// The lease client on `conn`, telling the history of every renewal and loss.
    fn client(&self, conn: E::Conn, config: LeaseConfig) -> Option<LeaseClient<E::Conn>> {
        let tokens = match self.env.tokens(&self.cfg.node, self.cfg.incarnation) {
            Ok(t) => t,
            Err(e) => {
                self.emitter.emit(EventKind::Error { message: e.to_string() });
                return None;
            }
        };
        let (emitter, env) = (self.emitter.clone(), self.env.clone());
        let observer = move |e: &LeaseEvent| match e {
            LeaseEvent::Renewed { token, sent_at, .. } => {
                emitter.emit(EventKind::Renewed { token: token.to_string(), sent_ns: Some(env.instant_ns(*sent_at)) })
            }
            LeaseEvent::Lost { token, loss } => emitter.emit(EventKind::OwnershipLost {
                token: token.to_string(),
                reason: loss.reason.kind().to_owned(),
                checkpoint: loss.checkpoint.as_deref().and_then(checkpoint_number),
            }),
        };
        match LeaseClient::new(conn, config, tokens) {
            Ok(c) => Some(c.with_spawner(self.env.renewal()).with_jitter_seed(self.cfg.seed).with_observer(observer)),
            Err(e) => {
                self.emitter.emit(EventKind::Error { message: e.to_string() });
                None
            }
        }
    }

    async fn round(&mut self, guard: &Guard<E>, token: &str) -> Outcome {
        let p = self.cfg.pipeline.clone();
        self.lost = guard.lost_token();
        self.pending_sync = None;
        let mut fence = guard.fence();
        if self.cfg.fence_source == FenceSource::Store {
            match self.call(guard, StoreOp::BeginEpoch, token, 0, None, 0).await {
                Ok(v) => fence = v["fence"].as_u64().unwrap_or(0),
                Err(o) => return o,
            }
        }
        if let Err(o) = self.work(guard, Duration::from_millis(p.prepare_ms)).await {
            return o;
        }
        if let Err(o) = self.checkpoint(guard, token, 1).await {
            return o;
        }
        for batch in 0..p.batches {
            if let Err(o) = self.hold().await {
                return o;
            }
            // New work starts only while the lease is locally valid.
            let decided_ns = match guard.still_valid() {
                Ok(at) => Some(self.env.instant_ns(at)),
                Err(e) => return aborted(e.is_lost(), e.to_string()),
            };
            let began = tokio::time::Instant::now();
            if let Err(o) = self.model_call(guard, token, fence, batch).await {
                return o;
            }
            let ms = u64::try_from(began.elapsed().as_millis()).unwrap_or(u64::MAX);
            self.emitter.emit(EventKind::ModelCall { token: token.into(), batch, ms, decided_ns });
            if batch + 1 < p.batches {
                if let Err(o) = self.checkpoint(guard, token, 2).await {
                    return o;
                }
            }
        }
        if let Err(o) = self.checkpoint(guard, token, 3).await {
            return o;
        }
        let view = self.tenant_view().await.unwrap_or(Value::Null);
        let previous = view["alias"].as_str().map(str::to_owned);
        // Every collection but the alias's target: temporaries of aborted rounds, and a live one
        // replaced by a round that stopped before its own drop (else it would stay for good).
        let leftovers: Vec<String> = view["collections"]
            .as_array()
            .map(|cs| {
                cs.iter()
                    .filter_map(|c| c["name"].as_str())
                    .filter(|n| Some(*n) != previous.as_deref())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        for name in leftovers {
            if let Err(o) = self.call_tolerating(guard, StoreOp::DropCollection, token, fence, &name, &[404, 409]).await
            {
                return o;
            }
        }
        let name = format!(
            "{}-f{}-{}-i{}-r{}",
            self.cfg.tenant,
            fence,
            self.cfg.node,
            self.cfg.incarnation,
            self.emitter.round.load(Ordering::Relaxed)
        );
        if let Err(o) = self.call(guard, StoreOp::CreateCollection, token, fence, Some(&name), 0).await {
            return o;
        }
        if let Err(o) = self.checkpoint(guard, token, 4).await {
            return o;
        }
        for _ in 0..p.batches {
            if let Err(o) = self.call(guard, StoreOp::Upsert, token, fence, Some(&name), u64::from(p.batch_size)).await
            {
                return o;
            }
        }
        if let Err(o) = self.checkpoint(guard, token, 5).await {
            return o;
        }
        if let Err(o) = self.call(guard, StoreOp::SwitchAlias, token, fence, Some(&name), 0).await {
            return o;
        }
        for n in [6, 7] {
            if let Err(o) = self.checkpoint(guard, token, n).await {
                return o;
            }
        }
        if let Err(o) = self.call(guard, StoreOp::PersistRecord, token, fence, Some(&name), 0).await {
            return o;
        }
        if let Some(old) = previous.filter(|old| *old != name) {
            if let Err(o) = self.call_tolerating(guard, StoreOp::DropCollection, token, fence, &old, &[404, 409]).await
            {
                return o;
            }
        }
        Outcome::Finished(name)
    }

    /// One model call: a request to the model service when there is one (protocol 4), else the
    /// model's time spent here. Either way the lease's loss cancels it at once (the request is
    /// dropped: the service logs the call unanswered). A `slow_model` command adds its time here.
    async fn model_call(&mut self, guard: &Guard<E>, token: &str, fence: u64, batch: u32) -> Result<(), Outcome> {
        let p = &self.cfg.pipeline;
        let (embed_ms, timeout_ms) = (p.embed_ms, p.embed_ms.saturating_add(p.store_timeout_ms));
        let extra = self.slow_model.load(Ordering::Relaxed);
        if self.cfg.model_addr.is_none() || extra > 0 {
            let local = if self.cfg.model_addr.is_none() { embed_ms + extra } else { extra };
            self.work(guard, Duration::from_millis(local)).await?;
            if self.cfg.model_addr.is_none() {
                return Ok(());
            }
        }
        let body = json!({ "tenant": self.cfg.tenant, "node": self.cfg.node, "token": token, "fence": fence,
                           "batch": batch, "ms": embed_ms })
        .to_string();
        self.hold().await?;
        let call = tokio::time::timeout(Duration::from_millis(timeout_ms), self.env.model(body));
        tokio::select! {
            biased;
            () = self.stop.cancelled() => Err(aborted(false, "stopped")),
            loss = guard.lost() => Err(aborted(true, loss.reason.kind())),
            answer = call => match answer {
                Ok(Ok((200, _))) => Ok(()),
                Ok(Ok((status, body))) => Err(aborted(false, format!("the model service answered {status}: {body}"))),
                Ok(Err(StoreFailure::NotDelivered(e) | StoreFailure::NoAnswer(e))) => {
                    Err(aborted(false, format!("the model call failed: {e}")))
                }
                Err(_) => Err(aborted(false, format!("no answer from the model service within {timeout_ms} ms"))),
            },
        }
    }

    /// Wall-time work that ownership loss (or stop) cancels at once.
    async fn work(&mut self, guard: &Guard<E>, d: Duration) -> Result<(), Outcome> {
        self.hold().await?;
        tokio::select! {
            biased;
            () = self.stop.cancelled() => Err(aborted(false, "stopped")),
            loss = guard.lost() => Err(aborted(true, loss.reason.kind())),
            () = tokio::time::sleep(d) => Ok(()),
        }
    }

    async fn checkpoint(&mut self, guard: &Guard<E>, token: &str, n: u8) -> Result<(), Outcome> {
        self.hold().await?;
        if self.cfg.pipeline.checkpoints.contains(&n) {
            match guard.ensure_owned_at(checkpoint_name(n)).await {
                Ok(decided) => {
                    // The loss can land between the check and this line: then the check counts
                    // as failed (the loss is sticky), never as passed after the loss.
                    let decided_ns = Some(self.env.instant_ns(decided));
                    let passed = EventKind::CheckpointPassed { token: token.into(), number: n, decided_ns };
                    if !self.emitter.emit_unless_lost(&self.lost, passed) {
                        let reason = format!("ownership lost right after checkpoint {n} checked");
                        self.emitter.emit(EventKind::CheckpointFailed {
                            token: token.into(),
                            number: n,
                            reason: reason.clone(),
                        });
                        return Err(aborted(true, reason));
                    }
                }
                Err(e) => {
                    self.emitter.emit(EventKind::CheckpointFailed {
                        token: token.into(),
                        number: n,
                        reason: e.to_string(),
                    });
                    return Err(aborted(e.is_lost(), e.to_string()));
                }
            }
        }
        if self.cfg.pipeline.sync_points.contains(&n) {
            self.pending_sync = Some((n, token.to_owned()));
        }
        Ok(())
    }

    /// Holds at a pending sync point: says `sync_point` and waits for its `go`. Called before the
    /// step that follows the checkpoint; before a store call, after `store_call_sent`, so that the
    /// hold is a pause between a passed check and a write the node has committed to.
    async fn hold(&mut self) -> Result<(), Outcome> {
        let Some((n, token)) = self.pending_sync.take() else { return Ok(()) };
        self.emitter.emit(EventKind::SyncPoint { token, number: n });
        // Bounded by `stop`: waits for this checkpoint's go; other numbers are stale and dropped.
        loop {
            tokio::select! {
                biased;
                () = self.stop.cancelled() => return Err(aborted(false, "stopped")),
                go = self.go.recv() => match go {
                    Some(k) if k == n => return Ok(()),
                    Some(_) => continue,
                    None => return Err(aborted(false, "stopped")),
                },
            }
        }
    }

    async fn tenant_view(&self) -> Option<Value> {
        let path = format!("/v1/tenants/{}", self.cfg.tenant);
        let timeout = Duration::from_millis(self.cfg.pipeline.store_timeout_ms);
        let (status, body) = tokio::time::timeout(timeout, self.env.store("GET", path, None)).await.ok()?.ok()?;
        (status == 200).then(|| serde_json::from_str(&body).ok()).flatten()
    }

    async fn call_tolerating(
        &mut self,
        guard: &Guard<E>,
        op: StoreOp,
        token: &str,
        fence: u64,
        name: &str,
        ok: &[u16],
    ) -> Result<(), Outcome> {
        match self.call_status(guard, op, token, fence, Some(name), 0).await {
            Ok(_) => Ok(()),
            Err((Some(status), _)) if ok.contains(&status) => Ok(()),
            Err((_, o)) => Err(o),
        }
    }

    async fn call(
        &mut self,
        guard: &Guard<E>,
        op: StoreOp,
        token: &str,
        fence: u64,
        collection: Option<&str>,
        points: u64,
    ) -> Result<Value, Outcome> {
        self.call_status(guard, op, token, fence, collection, points).await.map_err(|(_, o)| o)
    }

    /// One store call with its sent / acked / rejected / unknown events.
    async fn call_status(
        &mut self,
        guard: &Guard<E>,
        op: StoreOp,
        token: &str,
        fence: u64,
        collection: Option<&str>,
        points: u64,
    ) -> Result<Value, (Option<u16>, Outcome)> {
        self.call += 1;
        let call = self.call;
        let body = json!({
            "tenant": self.cfg.tenant, "node": self.cfg.node, "token": token, "fence": fence,
            "call": call, "collection": collection, "points": points,
        });
        // The loss token is the round's cancellation: a node that knows it lost, or whose local
        // validity ran out, starts no store call, checkpoint or not (a call already on its way
        // is the fence's to stop).
        let decided_ns = match guard.still_valid() {
            Ok(at) => Some(self.env.instant_ns(at)),
            Err(e) => return Err((None, aborted(e.is_lost(), format!("before store call {op:?}: {e}")))),
        };
        let sent = EventKind::StoreCallSent { token: token.into(), fence, op, call, decided_ns };
        if !self.emitter.emit_unless_lost(&self.lost, sent) {
            return Err((None, aborted(true, format!("ownership lost before store call {op:?}"))));
        }
        self.in_flight = Some((token.into(), call));
        self.hold().await.map_err(|o| (None, o))?;
        let timeout = Duration::from_millis(self.cfg.pipeline.store_timeout_ms);
        let answer =
            tokio::time::timeout(timeout, self.env.store("POST", op_path(op).to_owned(), Some(body.to_string()))).await;
        self.in_flight = None;
        let unknown = |emitter: &Emitter, detail: String| {
            emitter.emit(EventKind::StoreCallUnknown { token: token.into(), call, detail: detail.clone() });
            (None, aborted(false, format!("store call {op:?} outcome unknown: {detail}")))
        };
        match answer {
            Ok(Ok((200, text))) => {
                self.emitter.emit(EventKind::StoreCallAcked { token: token.into(), call });
                Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
            }
            Ok(Ok((status, text))) => {
                let reason = serde_json::from_str::<Value>(&text)
                    .ok()
                    .and_then(|v| v["error"].as_str().map(str::to_owned))
                    .unwrap_or(text);
                self.emitter.emit(EventKind::StoreCallRejected { token: token.into(), call, reason: reason.clone() });
                Err((Some(status), aborted(false, format!("store rejected {op:?}: {reason}"))))
            }
            Ok(Err(StoreFailure::NotDelivered(e))) => Err(unknown(&self.emitter, format!("not delivered: {e}"))),
            Ok(Err(StoreFailure::NoAnswer(e))) => Err(unknown(&self.emitter, e)),
            Err(_) => Err(unknown(&self.emitter, format!("no answer within {} ms", timeout.as_millis()))),
        }
    }
}

/// The number of the checkpoint named `name`.
fn checkpoint_number(name: &str) -> Option<u8> {
    CHECKPOINTS.iter().find(|(_, n)| *n == name).map(|(k, _)| *k)
}
