//! The HTTP API of Toxiproxy 2.12: routes, bodies, status codes and error shapes. Each handler
//! reads the request, calls the `Collection`, and answers JSON; nothing here touches sockets.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{CONTENT_TYPE, USER_AGENT};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, warn};

use crate::error::ApiError;
use crate::proxy::{Collection, ProxySpec};

/// The Toxiproxy API version this server speaks.
pub const API_VERSION: &str = "2.12.0";
/// The largest request body accepted.
const BODY_LIMIT: usize = 1 << 20;
/// Requests that take longer than this are answered with 503 (Toxiproxy uses 25 s).
const HANDLER_TIMEOUT: Duration = Duration::from_secs(25);
/// A request's headers must arrive within this, and its body within this after them; an idle
/// kept-alive connection is closed after it too.
const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// The most API connections open at once: past it a new connection is closed at once, so clients
/// holding half-sent requests cannot lock the API out (the read timeout frees their places).
pub const MAX_API_CONNECTIONS: usize = 256;

/// Serves the API on `listener` until `cancel` fires, then stops every proxy.
pub async fn serve(listener: TcpListener, collection: Arc<Collection>, cancel: CancellationToken) {
    if let Ok(addr) = listener.local_addr() {
        collection.serving_at(&addr.to_string());
    }
    let conns = TaskTracker::new();
    let places = Arc::new(Semaphore::new(MAX_API_CONNECTIONS));
    loop {
        let (stream, peer) = tokio::select! {
            () = cancel.cancelled() => break,
            a = listener.accept() => match a {
                Ok(a) => a,
                Err(e) => { warn!(error = %e, "api accept failed"); tokio::time::sleep(Duration::from_millis(10)).await; continue; }
            },
        };
        let Ok(place) = places.clone().try_acquire_owned() else {
            warn!(%peer, limit = MAX_API_CONNECTIONS, "api connection refused: too many open");
            drop(stream);
            continue;
        };
        let collection = collection.clone();
        let stop = cancel.clone();
        conns.spawn(async move {
            let _place = place;
            let service = hyper::service::service_fn(move |req| handle(collection.clone(), req, peer));
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(READ_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service);
            tokio::pin!(conn);
            tokio::select! {
                r = conn.as_mut() => if let Err(e) = r { debug!(error = %e, "api connection ended with an error") },
                () = stop.cancelled() => conn.as_mut().graceful_shutdown(),
            }
        });
    }
    conns.close();
    let _ = tokio::time::timeout(Duration::from_secs(2), conns.wait()).await;
    collection.shutdown().await;
}

async fn handle(
    collection: Arc<Collection>,
    req: Request<Incoming>,
    peer: SocketAddr,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let query = req.uri().query().unwrap_or_default().to_owned();
    if req.headers().get(USER_AGENT).and_then(|v| v.to_str().ok()).is_some_and(|ua| ua.starts_with("Mozilla/")) {
        return Ok(text(StatusCode::FORBIDDEN, "User agent not allowed\n"));
    }
    let body = match tokio::time::timeout(READ_TIMEOUT, Limited::new(req.into_body(), BODY_LIMIT).collect()).await {
        Ok(Ok(b)) => b.to_bytes(),
        Ok(Err(e)) => return Ok(error(&ApiError::BadRequestBody(e.to_string()))),
        Err(_) => {
            return Ok(error(&ApiError::BadRequestBody(format!("the body did not arrive within {READ_TIMEOUT:?}"))))
        }
    };
    let answer = tokio::time::timeout(HANDLER_TIMEOUT, route(&collection, (&method, &path, &query), &body)).await;
    let response = match answer {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => error(&e),
        Err(_) => text(StatusCode::SERVICE_UNAVAILABLE, ""),
    };
    debug!(%peer, %method, path, status = response.status().as_u16(), "api request");
    Ok(response)
}

async fn route(
    c: &Collection,
    (method, path, query): (&Method, &str, &str),
    body: &[u8],
) -> Result<Response<Full<Bytes>>, ApiError> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let is = |m: &Method| method == m;
    let update = is(&Method::POST) || is(&Method::PATCH);
    match segments.as_slice() {
        ["version"] if is(&Method::GET) => Ok(json(StatusCode::OK, &serde_json::json!({ "version": API_VERSION }))),
        ["reset"] if is(&Method::POST) => c.reset().await.map(|()| empty()),
        ["populate"] if is(&Method::POST) => Ok(populate(c, body).await),
        ["proxies"] if is(&Method::GET) => Ok(json(StatusCode::OK, &c.index().await)),
        ["proxies"] if is(&Method::POST) => {
            let spec = ProxySpec::from_json(&Value::Object(object(body)?))?;
            Ok(json(StatusCode::CREATED, &c.create(spec).await?))
        }
        ["proxies", p] if is(&Method::GET) => Ok(json(StatusCode::OK, &c.show(p).await?)),
        ["proxies", p] if update => {
            let obj = object(body)?;
            let field = |k: &str| obj.get(k).and_then(Value::as_str).map(str::to_owned);
            let enabled = match obj.get("enabled") {
                None | Some(Value::Null) => None,
                Some(Value::Bool(b)) => Some(*b),
                Some(v) => return Err(ApiError::BadRequestBody(format!("`enabled` must be true or false, got {v}"))),
            };
            Ok(json(StatusCode::OK, &c.update(p, field("listen"), field("upstream"), enabled).await?))
        }
        ["proxies", p] if is(&Method::DELETE) => c.delete(p).await.map(|()| empty()),
        // An extension (Toxiproxy has no such route): what the proxy's clients sent and got back.
        ["proxies", p, "witness"] if is(&Method::GET) => {
            let (after, limit) = witness_query(query)?;
            Ok(json(StatusCode::OK, &c.witness(p, after, limit).await?))
        }
        ["proxies", p, "toxics"] if is(&Method::GET) => Ok(json(StatusCode::OK, &c.toxics(p).await?)),
        ["proxies", p, "toxics"] if is(&Method::POST) => Ok(json(StatusCode::OK, &c.add_toxic(p, body).await?)),
        ["proxies", p, "toxics", t] if is(&Method::GET) => Ok(json(StatusCode::OK, &c.toxic(p, t).await?)),
        ["proxies", p, "toxics", t] if update => Ok(json(StatusCode::OK, &c.update_toxic(p, t, body).await?)),
        ["proxies", p, "toxics", t] if is(&Method::DELETE) => c.remove_toxic(p, t).await.map(|()| empty()),
        ["version" | "reset" | "populate" | "proxies"]
        | ["proxies", _]
        | ["proxies", _, "toxics"]
        | ["proxies", _, "toxics", _] => Ok(text(StatusCode::METHOD_NOT_ALLOWED, "")),
        _ => Ok(text(StatusCode::NOT_FOUND, "404 page not found\n")),
    }
}

/// The most witness records one request gets.
pub const WITNESS_PAGE_MAX: usize = 10_000;

/// `after=N&limit=M` of a witness request (both optional: 0 and the page's maximum).
fn witness_query(query: &str) -> Result<(u64, usize), ApiError> {
    let mut out = (0, WITNESS_PAGE_MAX);
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let bad = || ApiError::BadRequestBody(format!("`{k}` must be a whole number, got {v:?}"));
        match k {
            "after" => out.0 = v.parse().map_err(|_| bad())?,
            "limit" => out.1 = v.parse::<usize>().map_err(|_| bad())?.min(WITNESS_PAGE_MAX),
            _ => return Err(ApiError::BadRequestBody(format!("unknown query parameter `{k}` (after, limit)"))),
        }
    }
    Ok(out)
}

/// `POST /populate`: an array of proxies (or `{"proxies": [...]}`), created or updated in order.
async fn populate(c: &Collection, body: &[u8]) -> Response<Full<Bytes>> {
    let parsed = ProxySpec::list_from_json(body);
    let (done, err) = match parsed {
        Ok(specs) => c.populate(specs).await,
        Err(e) => (Vec::new(), Some(e)),
    };
    match err {
        None => json(StatusCode::CREATED, &serde_json::json!({ "proxies": done })),
        Some(e) => {
            let mut body = e.to_json();
            body["proxies"] = Value::Array(done);
            json(StatusCode::from_u16(e.status()).unwrap_or(StatusCode::BAD_REQUEST), &body)
        }
    }
}

fn object(body: &[u8]) -> Result<serde_json::Map<String, Value>, ApiError> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(o)) => Ok(o),
        Ok(_) => Err(ApiError::BadRequestBody("expected a JSON object".into())),
        Err(e) => Err(ApiError::BadRequestBody(e.to_string())),
    }
}

fn json(status: StatusCode, value: &Value) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(value.to_string())));
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, hyper::header::HeaderValue::from_static("application/json"));
    r
}

fn error(e: &ApiError) -> Response<Full<Bytes>> {
    json(StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR), &e.to_json())
}

fn empty() -> Response<Full<Bytes>> {
    text(StatusCode::NO_CONTENT, "")
}

fn text(status: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *r.status_mut() = status;
    r
}
