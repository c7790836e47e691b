//! One JSON request over HTTP/1.1 on its own connection: the exchange under the proxy's client,
//! also used by the harness for its other control-plane services. Tells a request that was never
//! sent (connect failed) from one that may have been delivered, which callers of fenced writes
//! must record as "unknown". Timeouts are the caller's.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// Why an exchange failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExchangeError {
    /// No connection: the request was certainly not delivered.
    #[error("cannot connect: {0}")]
    Connect(String),
    /// The connection failed after the request may have been sent: it may have been applied.
    #[error("connection failed after sending: {0}")]
    AfterSend(String),
    /// The request could not be built, or the answer was not HTTP.
    #[error("malformed exchange: {0}")]
    Malformed(String),
}

/// Sends `method path` with a JSON `body` to `addr` and returns the status and body text.
pub async fn exchange(
    addr: &str,
    method: &str,
    path: &str,
    body: Option<String>,
) -> Result<(u16, String), ExchangeError> {
    let stream = TcpStream::connect(addr).await.map_err(|e| ExchangeError::Connect(e.to_string()))?;
    let _ = stream.set_nodelay(true);
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| ExchangeError::Connect(e.to_string()))?;
    // The connection's driver writes the request: aborted when this exchange ends or is dropped
    // (a caller that gave up on the call), so a cancelled request never leaves afterwards, say
    // after the caller released the lease it was made under.
    let driver = AbortOnDrop(tokio::spawn(conn));
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("host", addr)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.unwrap_or_default())))
        .map_err(|e| ExchangeError::Malformed(e.to_string()))?;
    let result = async {
        let resp = sender.send_request(req).await.map_err(|e| ExchangeError::AfterSend(e.to_string()))?;
        let status = resp.status().as_u16();
        let bytes = resp.into_body().collect().await.map_err(|e| ExchangeError::AfterSend(e.to_string()))?.to_bytes();
        Ok((status, String::from_utf8_lossy(&bytes).into_owned()))
    }
    .await;
    drop(driver);
    result
}

/// A task aborted when this handle is dropped.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}
