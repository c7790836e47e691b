//! The reference node (`leasequake node`): the job (`job`) as a process speaking the node
//! protocol (docs/node-protocol.md) as JSON lines: commands on stdin, events on stdout, logs on
//! stderr. Renewal runs on a thread of its own, so `stall_renewal` blocks renewal alone. The node
//! exits when told to stop or when stdin closes (its parent is gone).

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use leasequake_reports::history::{EventKind, NodeCommand, NodeEvent, PROTOCOL_VERSION};
use leasequake_toxiproxy::http::{exchange, ExchangeError};
use redis_lease::{LeaseError, UniqueTokens};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio_util::codec::{FramedRead, LinesCodec};

use crate::clock::{instant_ns, mono_ns};
use crate::error::HarnessError;
pub use crate::job::Variant;
use crate::job::{Emitter, NodeEnv, StoreFailure};

const EVENT_QUEUE: usize = 65_536;
const LINE_LIMIT: usize = 1 << 20;

/// Runs the reference node on `input`/`output` until stopped. Returns an error only when the
/// node cannot start (no configuration, wrong protocol); everything later is reported as events.
pub async fn run(
    input: impl AsyncRead + Unpin + Send + 'static,
    output: impl AsyncWrite + Unpin + Send + 'static,
) -> Result<(), HarnessError> {
    run_variant(input, output, Variant::reference()).await
}

/// Runs a node variant (see [`Variant`]); otherwise as [`run`].
pub async fn run_variant(
    input: impl AsyncRead + Unpin + Send + 'static,
    output: impl AsyncWrite + Unpin + Send + 'static,
    variant: Variant,
) -> Result<(), HarnessError> {
    let (tx, mut rx) = mpsc::channel::<NodeEvent>(EVENT_QUEUE);
    let writer = tokio::spawn(async move {
        let mut out = output;
        while let Some(event) = rx.recv().await {
            let mut line = serde_json::to_string(&event).unwrap_or_default();
            line.push('\n');
            if out.write_all(line.as_bytes()).await.is_err() || out.flush().await.is_err() {
                return; // the harness is gone
            }
        }
    });
    let emitter = Emitter::new(tx, Arc::new(mono_ns));
    let result = serve(input, emitter, Arc::new(variant)).await;
    let _ = tokio::time::timeout(Duration::from_secs(2), writer).await;
    result
}

async fn serve(
    input: impl AsyncRead + Unpin + Send + 'static,
    emitter: Emitter,
    variant: Arc<Variant>,
) -> Result<(), HarnessError> {
    let mut lines = FramedRead::new(input, LinesCodec::new_with_max_length(LINE_LIMIT));
    let protocol = |detail: String| HarnessError::NodeProtocol { detail };
    let config = match lines.next().await {
        Some(Ok(line)) => match serde_json::from_str::<NodeCommand>(&line) {
            Ok(NodeCommand::Config(c)) => *c,
            Ok(other) => return Err(protocol(format!("the first line must be a config, got {other:?}"))),
            Err(e) => return Err(protocol(format!("unreadable config line: {e}"))),
        },
        Some(Err(e)) => return Err(protocol(format!("cannot read the config line: {e}"))),
        None => return Err(protocol("stdin closed before a config line".into())),
    };
    // The harness offers `protocol` (its oldest) to `protocol_max` (its newest).
    let newest = config.protocol_max.unwrap_or(config.protocol);
    if !(config.protocol..=newest).contains(&PROTOCOL_VERSION) {
        emitter.emit(EventKind::Error {
            message: format!(
                "the harness offers protocol {} to {newest}; this node speaks {PROTOCOL_VERSION}",
                config.protocol
            ),
        });
        return Err(protocol(format!("unsupported protocol {}..={newest}", config.protocol)));
    }
    emitter.emit(EventKind::Hello {
        protocol: PROTOCOL_VERSION,
        implementation: match &variant.label {
            Some(label) => format!("leasequake-node {} ({label})", env!("CARGO_PKG_VERSION")),
            None => format!("leasequake-node {}", env!("CARGO_PKG_VERSION")),
        },
        lease_key: None,
        renewals: None,
    });
    let (env, renewal_thread, end_tx) =
        ProcessEnv::start(&config.redis_url, &config.store_addr, config.model_addr.as_deref())?;
    let commands = lines.map(|l| {
        l.map_err(|e| e.to_string()).and_then(|l| serde_json::from_str::<NodeCommand>(&l).map_err(|e| e.to_string()))
    });
    crate::job::run(Arc::new(env), config, emitter, commands, variant).await;
    let _ = end_tx.send(());
    let _ = renewal_thread.join();
    Ok(())
}

/// The process's world: the machine's monotonic clock, Redis through redis-rs's connection
/// manager, the store over HTTP, renewal on a runtime of its own on its own thread.
struct ProcessEnv {
    redis: Result<redis::Client, String>,
    store_addr: String,
    model_addr: Option<String>,
    renewal: tokio::runtime::Handle,
}

impl ProcessEnv {
    /// Starts the renewal thread; returns the world, the thread and what ends it.
    fn start(
        redis_url: &str,
        store_addr: &str,
        model_addr: Option<&str>,
    ) -> Result<(Self, std::thread::JoinHandle<()>, tokio::sync::oneshot::Sender<()>), HarnessError> {
        let protocol = |detail: String| HarnessError::NodeProtocol { detail };
        let (handle_tx, handle_rx) = std::sync::mpsc::channel();
        let (end_tx, end_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("renewal".into())
            .spawn(move || {
                let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return };
                let _ = handle_tx.send(rt.handle().clone());
                rt.block_on(async {
                    let _ = end_rx.await;
                });
            })
            .map_err(|e| protocol(format!("cannot start the renewal thread: {e}")))?;
        let renewal = handle_rx.recv().map_err(|_| protocol("the renewal thread did not start".into()))?;
        // redis-rs's parse errors do not echo the URL, so no password reaches the history.
        let redis = redis::Client::open(redis_url).map_err(|e| format!("bad Redis URL: {e}"));
        let model_addr = model_addr.map(str::to_owned);
        Ok((Self { redis, store_addr: store_addr.to_owned(), model_addr, renewal }, thread, end_tx))
    }
}

fn failure(e: ExchangeError) -> StoreFailure {
    match e {
        ExchangeError::Connect(e) => StoreFailure::NotDelivered(e.to_string()),
        other => StoreFailure::NoAnswer(other.to_string()),
    }
}

impl NodeEnv for ProcessEnv {
    type Conn = redis::aio::ConnectionManager;
    type Tokens = UniqueTokens;

    fn now_ns(&self) -> u64 {
        mono_ns()
    }

    fn instant_ns(&self, at: tokio::time::Instant) -> u64 {
        instant_ns(at)
    }

    async fn connect(&self) -> Result<Self::Conn, String> {
        let client = self.redis.as_ref().map_err(Clone::clone)?;
        client.get_connection_manager().await.map_err(|e| e.to_string())
    }

    fn renewal(&self) -> impl redis_lease::Spawn {
        self.renewal.clone()
    }

    fn stall_renewal(&self, ms: u64) {
        // Blocks the renewal runtime's only thread: renewal freezes, the rest runs.
        drop(self.renewal.spawn(async move { std::thread::sleep(Duration::from_millis(ms)) }));
    }

    async fn store(
        &self,
        method: &'static str,
        path: String,
        body: Option<String>,
    ) -> Result<(u16, String), StoreFailure> {
        exchange(&self.store_addr, method, &path, body).await.map_err(failure)
    }

    async fn model(&self, body: String) -> Result<(u16, String), StoreFailure> {
        let Some(addr) = &self.model_addr else {
            return Err(StoreFailure::NotDelivered("no model service was given".into()));
        };
        exchange(addr, "POST", "/v1/embed", Some(body)).await.map_err(failure)
    }

    fn tokens(&self, node: &str, incarnation: u64) -> Result<UniqueTokens, LeaseError> {
        UniqueTokens::new(node.to_owned(), incarnation)
    }
}
