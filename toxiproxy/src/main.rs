//! `toxiproxy-server`: the fault proxy's server, with Toxiproxy's flags (`-host`, `-port`,
//! `-config`, `-seed`), accepted in the single-dash Go style and the `--flag` style alike.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use leasequake_toxiproxy::proxy::ProxySpec;
use leasequake_toxiproxy::{api, Collection};
use tokio_util::sync::CancellationToken;

const USAGE: &str = "usage: toxiproxy-server [-host HOST] [-port PORT] [-config FILE] [-seed N]
  -host    address to listen on for the API (default localhost)
  -port    port for the API (default 8474)
  -config  JSON file of proxies to create at start-up (as POST /populate)
  -seed    seed for toxicity rolls and jitter (default: from the OS)";

struct Flags {
    host: String,
    port: u16,
    config: Option<String>,
    seed: Option<u64>,
}

fn parse(args: impl Iterator<Item = String>) -> Result<Flags, String> {
    let mut flags = Flags { host: "localhost".into(), port: 8474, config: None, seed: None };
    let mut args = args.peekable();
    while let Some(arg) = args.next() {
        let arg = arg.trim_start_matches('-').to_owned();
        if arg == "h" || arg == "help" {
            return Err(String::new());
        }
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) => (n.to_owned(), Some(v.to_owned())),
            None => (arg.clone(), None),
        };
        let mut value = || inline.clone().or_else(|| args.next()).ok_or_else(|| format!("flag -{name} needs a value"));
        match name.as_str() {
            "host" => flags.host = value()?,
            "port" => flags.port = value()?.parse().map_err(|e| format!("-port: {e}"))?,
            "config" => flags.config = Some(value()?),
            "seed" => flags.seed = Some(value()?.parse().map_err(|e| format!("-seed: {e}"))?),
            other => return Err(format!("unknown flag -{other}")),
        }
    }
    Ok(flags)
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let flags = match parse(std::env::args().skip(1)) {
        Ok(f) => f,
        Err(msg) => {
            if !msg.is_empty() {
                eprintln!("error: {msg}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(run(flags)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}

async fn run(flags: Flags) -> anyhow::Result<()> {
    let addr = format!("{}:{}", flags.host, flags.port);
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .with_context(|| format!("cannot listen on {addr} (port in use? choose another with -port)"))?;
    let seed = flags.seed.unwrap_or_else(|| std::hash::BuildHasher::hash_one(&std::hash::RandomState::new(), 0u8));
    let limit = leasequake_toxiproxy::descriptors::raise_open_file_limit();
    let collection = Arc::new(Collection::new(seed));
    if let Some(path) = &flags.config {
        let text = std::fs::read(path).with_context(|| format!("cannot read -config {path}"))?;
        let specs =
            ProxySpec::list_from_json(&text).with_context(|| format!("-config {path}: not a valid list of proxies"))?;
        if let (_, Some(e)) = collection.populate(specs).await {
            anyhow::bail!("{path}: {e}");
        }
    }
    tracing::info!(address = %listener.local_addr()?, version = api::API_VERSION, open_files = ?limit, "API listening");
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
    api::serve(listener, collection, cancel).await;
    Ok(())
}
