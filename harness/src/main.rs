//! The `leasequake` command line.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use leasequake::demo::{self, DemoConfig};
use leasequake::local_redis::LocalRedis;
use tokio_util::sync::CancellationToken;

#[derive(Parser)]
#[command(name = "leasequake", version, about = "Proves a Redis-leased job never lets a stale node write")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Container images the harness runs, built locally from this checkout (no registry).
    Images {
        #[command(subcommand)]
        action: ImagesAction,
    },
    /// Run as a node: the reference tenant-sync job, speaking the node protocol on stdin/stdout.
    Node,
    /// Run the vector store (the run's ground truth: its audit log).
    VectorStore {
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:7700")]
        listen: String,
        /// `enforce` rejects writes under an older fence; `observe` accepts everything.
        #[arg(long, value_enum, default_value = "enforce")]
        policy: PolicyArg,
        /// Also append every audit record to this file (JSON lines).
        #[arg(long)]
        audit_file: Option<std::path::PathBuf>,
    },
    /// Workers contend for one tenant's lease on a real Redis (a local redis-server by default).
    Demo {
        /// Use this Redis instead of starting a local redis-server.
        #[arg(long)]
        redis: Option<String>,
        #[arg(long, default_value_t = 3)]
        workers: u32,
        #[arg(long, default_value = "tenant-a")]
        tenant: String,
        /// Lease ttl in ms (production: 120000; the other durations keep its ratios).
        #[arg(long, default_value_t = 1500)]
        ttl_ms: u64,
        /// How long to run, in seconds.
        #[arg(long, default_value_t = 5)]
        seconds: u64,
    },
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum PolicyArg {
    Enforce,
    Observe,
}

#[derive(Subcommand)]
enum ImagesAction {
    /// Build every image whose inputs changed (reuses the others); prints each reference.
    Build,
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(3);
        }
    };
    let code = match runtime.block_on(dispatch(cli.command)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(3)
        }
    };
    // A node's stdin reader sits on a blocking thread that never returns by itself.
    runtime.shutdown_timeout(Duration::from_millis(200));
    code
}

async fn dispatch(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Node => {
            leasequake::node::run(tokio::io::stdin(), tokio::io::stdout()).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::VectorStore { listen, policy, audit_file } => {
            let policy = match policy {
                PolicyArg::Enforce => leasequake_reports::history::StorePolicy::Enforce,
                PolicyArg::Observe => leasequake_reports::history::StorePolicy::Observe,
            };
            let listener = tokio::net::TcpListener::bind(&listen)
                .await
                .with_context(|| format!("cannot listen on {listen} (port in use? choose another with --listen)"))?;
            let store = std::sync::Arc::new(
                leasequake::store::Store::new(policy, audit_file.as_deref()).context("cannot create the audit file")?,
            );
            eprintln!("vector store listening on {}", listener.local_addr()?);
            let cancel = CancellationToken::new();
            let stop = cancel.clone();
            tokio::spawn(async move {
                let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    Some(()) = async { match term.as_mut() { Some(t) => t.recv().await, None => std::future::pending().await } } => {}
                }
                stop.cancel();
            });
            leasequake::store::serve(listener, store, cancel).await;
            Ok(ExitCode::SUCCESS)
        }
        Command::Images { action: ImagesAction::Build } => {
            let docker = leasequake::docker::connect().await?;
            let spec = leasequake::image::ImageSpec::proxy()?;
            let built = leasequake::image::ensure(&docker, &spec).await?;
            let what = if built.rebuilt { "built" } else { "unchanged, reused" };
            println!(
                "{}  {what} in {:.2} s  (also tagged {})",
                built.reference,
                built.took.as_secs_f64(),
                built.stable
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Demo { redis, workers, tenant, ttl_ms, seconds } => {
            let local = match redis {
                Some(_) => None,
                None => Some(LocalRedis::start().await?),
            };
            let redis_url = redis.or_else(|| local.as_ref().map(LocalRedis::url)).context("no Redis")?;
            let cancel = CancellationToken::new();
            let ctrl_c = cancel.clone();
            tokio::spawn(async move {
                if tokio::signal::ctrl_c().await.is_ok() {
                    ctrl_c.cancel();
                }
            });
            let cfg = DemoConfig {
                redis_url,
                workers,
                tenant,
                ttl: Duration::from_millis(ttl_ms),
                duration: Duration::from_secs(seconds),
                step: Duration::from_millis(ttl_ms / 30),
            };
            println!("demo: {workers} workers, tenant {}, ttl {ttl_ms} ms, {seconds} s", cfg.tenant);
            let syncs = demo::run(cfg, cancel).await;
            if let Some(local) = local {
                local.stop().await;
            }
            let syncs = syncs?;
            for s in &syncs {
                println!("sync  worker w{}  fence {}", s.worker, s.fence);
            }
            let rising = syncs.windows(2).all(|w| w[0].fence < w[1].fence);
            println!("{} syncs, fences {}", syncs.len(), if rising { "strictly rising" } else { "NOT RISING" });
            Ok(if rising && !syncs.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) })
        }
    }
}
