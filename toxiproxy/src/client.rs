//! An async client of the Toxiproxy API, for the harness. It checks every status code and turns a
//! failed call into an error, never a silent success; every call has a timeout. It uses only what
//! the official Toxiproxy 2.12 also offers, so the harness can drive either; the one extension,
//! `witness`, says when the server has none.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use crate::http::ExchangeError;

use crate::toxic::Stream;

/// What can go wrong calling the API.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Nothing answered at the address.
    #[error("the fault proxy API at {addr} is unreachable: {detail} (is the proxy container running?)")]
    Unreachable {
        /// The API address.
        addr: String,
        /// The connection error.
        detail: String,
    },
    /// The call did not finish in time.
    #[error("the fault proxy API at {addr} did not answer `{method} {path}` within {timeout:?}")]
    Timeout {
        /// The API address.
        addr: String,
        /// The method.
        method: String,
        /// The path.
        path: String,
        /// The limit.
        timeout: Duration,
    },
    /// The API answered with an error status.
    #[error("`{method} {path}` failed with {status}: {message}")]
    Status {
        /// The method.
        method: String,
        /// The path.
        path: String,
        /// The HTTP status.
        status: u16,
        /// The API's error message.
        message: String,
    },
    /// The answer was not what the API documents.
    #[error("`{method} {path}` answered something unexpected: {detail}")]
    BadResponse {
        /// The method.
        method: String,
        /// The path.
        path: String,
        /// What was wrong.
        detail: String,
    },
}

/// A proxy as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ProxyInfo {
    /// Name.
    pub name: String,
    /// The bound listen address.
    pub listen: String,
    /// Where it forwards.
    pub upstream: String,
    /// Whether it listens.
    pub enabled: bool,
}

/// One page of a proxy's witness records (`GET /proxies/{name}/witness`, an extension).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct WitnessPage {
    /// The oldest seq the proxy still keeps.
    pub first: u64,
    /// The seq its next record will get.
    pub next: u64,
    /// Records it dropped for room.
    pub lost: u64,
    /// The records after the one asked for.
    pub records: Vec<leasequake_reports::wire::WireRecord>,
}

/// A toxic to add.
#[derive(Debug, Clone, PartialEq)]
#[must_use]
pub struct ToxicSpec {
    name: String,
    kind: &'static str,
    stream: Stream,
    toxicity: f32,
    attributes: Value,
}

impl ToxicSpec {
    fn new(kind: &'static str, stream: Stream, attributes: Value) -> Self {
        Self { name: format!("{kind}_{}", stream.as_str()), kind, stream, toxicity: 1.0, attributes }
    }
    /// Adds `latency_ms` (+- `jitter_ms`) to every chunk.
    pub fn latency(stream: Stream, latency_ms: u64, jitter_ms: u64) -> Self {
        Self::new("latency", stream, serde_json::json!({ "latency": latency_ms, "jitter": jitter_ms }))
    }
    /// Drops all data; closes after `timeout_ms` (0: holds forever). A blackhole partition.
    pub fn timeout(stream: Stream, timeout_ms: u64) -> Self {
        Self::new("timeout", stream, serde_json::json!({ "timeout": timeout_ms }))
    }
    /// Resets connections after `timeout_ms`.
    pub fn reset_peer(stream: Stream, timeout_ms: u64) -> Self {
        Self::new("reset_peer", stream, serde_json::json!({ "timeout": timeout_ms }))
    }
    /// Limits throughput to `rate_kb_s`.
    pub fn bandwidth(stream: Stream, rate_kb_s: u64) -> Self {
        Self::new("bandwidth", stream, serde_json::json!({ "rate": rate_kb_s }))
    }
    /// Closes the connection after `bytes` bytes.
    pub fn limit_data(stream: Stream, bytes: u64) -> Self {
        Self::new("limit_data", stream, serde_json::json!({ "bytes": bytes }))
    }
    /// Holds the client's renewals of `key` and what follows them on their connection, until the
    /// toxic is removed. An extension of this server's: the official Toxiproxy refuses the type.
    pub fn hold(key: &str) -> Self {
        Self::new("hold", Stream::Upstream, serde_json::json!({ "key": key }))
    }
    /// Loses the reply to the client's next `command` (`acquire`, `renew` or `release`) of `key`,
    /// once: the command runs, its reply is dropped and its connection closed. An extension of
    /// this server's: the official Toxiproxy refuses the type.
    pub fn lose_reply(key: &str, command: &str) -> Self {
        Self::new("lose_reply", Stream::Downstream, serde_json::json!({ "key": key, "command": command }))
    }
    /// Delays by `latency_ms` (+- `jitter_ms`) only the client's requests that do `command`
    /// (`acquire`, `renew`, `release`, or `lease`: any) to `key`. An extension of this server's:
    /// the official Toxiproxy would delay everything.
    pub fn latency_aimed(key: &str, command: &str, latency_ms: u64, jitter_ms: u64) -> Self {
        Self::new(
            "latency",
            Stream::Upstream,
            serde_json::json!({ "latency": latency_ms, "jitter": jitter_ms, "key": key, "command": command }),
        )
    }
    /// Names the toxic (default `<type>_<stream>`).
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }
    /// Applies to a connection with this probability, rolled once per connection.
    pub fn with_toxicity(mut self, toxicity: f32) -> Self {
        self.toxicity = toxicity;
        self
    }
    /// The toxic's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }
    fn to_json(&self) -> Value {
        serde_json::json!({
            "name": self.name, "type": self.kind, "stream": self.stream.as_str(),
            "toxicity": self.toxicity, "attributes": self.attributes,
        })
    }
}

/// The client. Cheap to clone; each call opens its own connection (the API is on loopback or a
/// container network, and faults must not queue behind one another).
#[derive(Debug, Clone)]
pub struct Client {
    addr: String,
    timeout: Duration,
}

impl Client {
    /// A client of the API at `addr` (`host:port`), with a 5 s timeout per call.
    #[must_use]
    pub fn new(addr: impl Into<String>) -> Self {
        Self { addr: addr.into(), timeout: Duration::from_secs(5) }
    }

    /// Use another per-call timeout.
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The server's version string.
    pub async fn version(&self) -> Result<String, ClientError> {
        let v = self.call("GET", "/version", None, 200).await?;
        v.get("version").and_then(Value::as_str).map(str::to_owned).ok_or_else(|| bad("GET", "/version", "no version"))
    }

    /// Creates an enabled proxy.
    pub async fn create_proxy(&self, name: &str, listen: &str, upstream: &str) -> Result<ProxyInfo, ClientError> {
        let body = serde_json::json!({ "name": name, "listen": listen, "upstream": upstream, "enabled": true });
        parse("POST", "/proxies", self.call("POST", "/proxies", Some(body), 201).await?)
    }

    /// Every proxy, by name.
    pub async fn proxies(&self) -> Result<BTreeMap<String, ProxyInfo>, ClientError> {
        parse("GET", "/proxies", self.call("GET", "/proxies", None, 200).await?)
    }

    /// One proxy.
    pub async fn proxy(&self, name: &str) -> Result<ProxyInfo, ClientError> {
        let path = format!("/proxies/{name}");
        parse("GET", &path, self.call("GET", &path, None, 200).await?)
    }

    /// Enables or disables a proxy (disabling closes its listener and connections).
    pub async fn set_enabled(&self, name: &str, enabled: bool) -> Result<ProxyInfo, ClientError> {
        self.update(name, serde_json::json!({ "enabled": enabled })).await
    }

    /// Re-points a proxy (closes its open connections, as Toxiproxy does).
    pub async fn set_upstream(&self, name: &str, upstream: &str) -> Result<ProxyInfo, ClientError> {
        self.update(name, serde_json::json!({ "upstream": upstream })).await
    }

    async fn update(&self, name: &str, body: Value) -> Result<ProxyInfo, ClientError> {
        let path = format!("/proxies/{name}");
        parse("POST", &path, self.call("POST", &path, Some(body), 200).await?)
    }

    /// Removes a proxy.
    pub async fn delete_proxy(&self, name: &str) -> Result<(), ClientError> {
        self.call("DELETE", &format!("/proxies/{name}"), None, 204).await.map(drop)
    }

    /// Adds a toxic to a proxy.
    pub async fn add_toxic(&self, proxy: &str, toxic: &ToxicSpec) -> Result<(), ClientError> {
        self.call("POST", &format!("/proxies/{proxy}/toxics"), Some(toxic.to_json()), 200).await.map(drop)
    }

    /// Removes a toxic from a proxy.
    pub async fn remove_toxic(&self, proxy: &str, toxic: &str) -> Result<(), ClientError> {
        self.call("DELETE", &format!("/proxies/{proxy}/toxics/{toxic}"), None, 204).await.map(drop)
    }

    /// The records of `proxy`'s witness after seq `after` (one page). An extension of this
    /// server's: `None` when the server has no witness (the official Toxiproxy answers its
    /// "404 page not found"); an unknown proxy is an error, as elsewhere.
    pub async fn witness(&self, proxy: &str, after: u64) -> Result<Option<WitnessPage>, ClientError> {
        let path = format!("/proxies/{proxy}/witness?after={after}");
        let (status, text) = self.request("GET", &path, None).await?;
        if status == 404 && !text.contains("proxy not found") {
            return Ok(None);
        }
        if status != 200 {
            return Err(ClientError::Status { method: "GET".into(), path, status, message: text });
        }
        serde_json::from_str(&text).map(Some).map_err(|e| bad("GET", &path, &e.to_string()))
    }

    /// Re-enables every proxy and removes every toxic.
    pub async fn reset(&self) -> Result<(), ClientError> {
        self.call("POST", "/reset", None, 204).await.map(drop)
    }

    async fn call(&self, method: &str, path: &str, body: Option<Value>, want: u16) -> Result<Value, ClientError> {
        let (status, text) = self.request(method, path, body.map(|b| b.to_string())).await?;
        let value = if text.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        if status != want {
            let message = value.get("error").and_then(Value::as_str).map_or_else(|| value.to_string(), str::to_owned);
            return Err(ClientError::Status { method: method.into(), path: path.into(), status, message });
        }
        Ok(value)
    }

    /// One raw request: the status and the body as text. For callers that need what the typed
    /// calls do not offer (and for conformance tests).
    pub async fn request(&self, method: &str, path: &str, body: Option<String>) -> Result<(u16, String), ClientError> {
        let timeout = |_| ClientError::Timeout {
            addr: self.addr.clone(),
            method: method.into(),
            path: path.into(),
            timeout: self.timeout,
        };
        tokio::time::timeout(self.timeout, self.exchange(method, path, body)).await.map_err(timeout)?
    }

    async fn exchange(&self, method: &str, path: &str, body: Option<String>) -> Result<(u16, String), ClientError> {
        crate::http::exchange(&self.addr, method, path, body).await.map_err(|e| match e {
            ExchangeError::Connect(detail) | ExchangeError::AfterSend(detail) => {
                ClientError::Unreachable { addr: self.addr.clone(), detail }
            }
            ExchangeError::Malformed(detail) => bad(method, path, &detail),
        })
    }
}

fn bad(method: &str, path: &str, detail: &str) -> ClientError {
    ClientError::BadResponse { method: method.into(), path: path.into(), detail: detail.into() }
}

fn parse<T: serde::de::DeserializeOwned>(method: &str, path: &str, v: Value) -> Result<T, ClientError> {
    serde_json::from_value(v).map_err(|e| bad(method, path, &e.to_string()))
}
