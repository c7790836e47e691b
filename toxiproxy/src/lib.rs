//! A TCP fault proxy that speaks Toxiproxy 2.12's HTTP API, and an async client for that API.
//!
//! ```text
//! api     the HTTP API: routes, JSON bodies, status codes, error shapes
//! proxy   proxies and their collection: listen, stop (port really freed), update, toxics
//! link    one proxied connection: two pumps applying the current toxics to every chunk
//! toxic   the toxics: parsing, JSON, attributes
//! witness what each proxy's clients sent and got back (Redis commands, HTTP requests), stamped
//! descriptors the pool listeners and links draw from, below the open-file limit, the API's reserve kept
//! client  the harness's async client: every status checked, every call timed out
//! http    one JSON request per connection; tells "never sent" from "maybe delivered"
//! error   ApiError (the API's answers)
//! ```
//!
//! The real Toxiproxy cannot be installed on machines without a registry; this stands in for it.
//! The client uses only what the real one offers, so the harness works against either.

pub mod api;
pub mod client;
pub mod descriptors;
pub mod error;
pub mod http;
mod link;
pub mod proxy;
pub mod toxic;
pub mod witness;

pub use client::{Client, ClientError, ProxyInfo, ToxicSpec, WitnessPage};
pub use error::ApiError;
pub use proxy::Collection;
pub use toxic::Stream;

/// Starts a server on `listener` in the background of the current runtime; cancel `cancel` to
/// stop it (every proxy is stopped too). Returns the task to await.
pub fn spawn_server(
    listener: tokio::net::TcpListener,
    seed: u64,
    cancel: tokio_util::sync::CancellationToken,
) -> tokio::task::JoinHandle<()> {
    let collection = std::sync::Arc::new(Collection::new(seed));
    tokio::spawn(api::serve(listener, collection, cancel))
}
