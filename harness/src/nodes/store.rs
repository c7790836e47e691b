//! The vector store: an HTTP service standing for the external vector database. Collections
//! (temporary and live, with their creator), batched upserts, one alias per tenant switched
//! atomically with a version, a sync record per tenant, drops. Every request, accepted or rejected,
//! is appended to the audit log with a gap-free arrival sequence: the ground truth the checker
//! reads. Fencing per run: `enforce` rejects a fence older than the newest seen for the tenant
//! (and a second owner presenting the newest fence); `observe` accepts everything. Fences come
//! from the lease (Redis) or from the store's own `epoch` call.
//!
//! The decisions are in `Store::apply` (no I/O but the audit file); `serve` is the HTTP shell.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use leasequake_reports::history::{AuditRecord, StoreOp, StorePolicy};
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::warn;

use crate::clock::mono_ns;

/// Most audit records one run may hold; past it the store answers 503 (the run is inconclusive).
pub const AUDIT_LIMIT: usize = 2_000_000;
const BODY_LIMIT: usize = 1 << 20;

/// A store request body: who asks, under which fence, about what.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreRequest {
    /// Tenant.
    pub tenant: String,
    /// Node id.
    pub node: String,
    /// Owner token.
    pub token: String,
    /// Fence (ignored by `epoch`).
    #[serde(default)]
    pub fence: u64,
    /// The node's call id.
    #[serde(default)]
    pub call: u64,
    /// Collection, for the ops that name one.
    #[serde(default)]
    pub collection: Option<String>,
    /// Points, for `upsert`.
    #[serde(default)]
    pub points: u64,
}

#[derive(Debug, Default)]
struct Tenant {
    newest_fence: u64,
    newest_token: Option<String>,
    alias: Option<(String, u64)>,
    record: Option<Value>,
}

#[derive(Debug, Clone)]
struct Collection {
    tenant: String,
    node: String,
    token: String,
    fence: u64,
    live: bool,
    points: u64,
}

struct State {
    seq: u64,
    tenants: BTreeMap<String, Tenant>,
    collections: BTreeMap<String, Collection>,
    audit: Vec<AuditRecord>,
    file: Option<BufWriter<File>>,
}

/// The store's state and rules.
pub struct Store {
    policy: StorePolicy,
    state: Mutex<State>,
    /// The model service served beside it (`POST /v1/embed`).
    model: crate::model::Model,
    /// The audit records' stamps: CLOCK_MONOTONIC, or a simulation's virtual clock.
    stamp: Arc<dyn Fn() -> u64 + Send + Sync>,
}

/// The answer to one request.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// HTTP status: 200 accepted, 409 fenced out or conflicting, 404 missing, 400 bad, 503 full.
    pub status: u16,
    /// JSON body: `{"ok": true, ...}` or `{"error": reason}`.
    pub body: Value,
}

impl Store {
    /// A store with `policy`, appending its audit log to `audit_file` if given.
    pub fn new(policy: StorePolicy, audit_file: Option<&Path>) -> std::io::Result<Self> {
        let file = audit_file.map(File::create).transpose()?.map(BufWriter::new);
        let state = State { seq: 0, tenants: BTreeMap::new(), collections: BTreeMap::new(), audit: Vec::new(), file };
        let stamp: Arc<dyn Fn() -> u64 + Send + Sync> = Arc::new(mono_ns);
        Ok(Self { policy, state: Mutex::new(state), model: crate::model::Model::new(stamp.clone()), stamp })
    }

    /// Stamps audit records (the store's and the model's) with `stamp` (a simulation's clock)
    /// instead of CLOCK_MONOTONIC.
    #[must_use]
    pub fn with_stamp(mut self, stamp: Arc<dyn Fn() -> u64 + Send + Sync>) -> Self {
        self.model = crate::model::Model::new(stamp.clone());
        self.stamp = stamp;
        self
    }

    /// The model service served beside the store.
    #[must_use]
    pub fn model(&self) -> &crate::model::Model {
        &self.model
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Applies one request of `op` and records it. The one serialization point of a run.
    pub fn apply(&self, op: StoreOp, req: &StoreRequest) -> Answer {
        let mut st = self.state();
        if st.audit.len() >= AUDIT_LIMIT {
            return Answer { status: 503, body: json!({ "error": "audit log full: the run is too long" }) };
        }
        let (status, reason, fence, alias_version, extra) = decide(&mut st, self.policy, op, req);
        st.seq += 1;
        let record = AuditRecord {
            seq: st.seq,
            mono_ns: (self.stamp)(),
            tenant: req.tenant.clone(),
            node: req.node.clone(),
            token: req.token.clone(),
            fence,
            op,
            collection: req.collection.clone(),
            accepted: status == 200,
            reason: reason.clone(),
            alias_version,
            call: req.call,
        };
        if let Some(f) = st.file.as_mut() {
            let line = serde_json::to_string(&record).unwrap_or_default();
            if writeln!(f, "{line}").and_then(|()| f.flush()).is_err() {
                warn!("cannot append to the audit file; the served log stays complete");
            }
        }
        st.audit.push(record);
        let body = match reason {
            None => {
                let mut b = json!({ "ok": true, "seq": st.seq, "fence": fence });
                if let (Value::Object(b), Value::Object(e)) = (&mut b, extra) {
                    b.extend(e);
                }
                b
            }
            Some(r) => json!({ "error": r, "seq": st.seq }),
        };
        Answer { status, body }
    }

    /// The last audit sequence number given (0 before the first record).
    pub fn audit_seq(&self) -> u64 {
        self.state().seq
    }

    /// The audit records with `seq > after`, in order.
    pub fn audit_after(&self, after: u64) -> Vec<AuditRecord> {
        let st = self.state();
        st.audit.iter().skip(after as usize).cloned().collect()
    }

    /// A tenant's live alias, version, sync record, and collections (name, live, points, creator).
    pub fn tenant_view(&self, tenant: &str) -> Value {
        let st = self.state();
        let t = st.tenants.get(tenant);
        let collections: Vec<Value> = st
            .collections
            .iter()
            .filter(|(_, c)| c.tenant == tenant)
            .map(|(n, c)| json!({ "name": n, "live": c.live, "points": c.points, "node": c.node, "token": c.token, "fence": c.fence }))
            .collect();
        json!({
            "alias": t.and_then(|t| t.alias.as_ref().map(|a| a.0.clone())),
            "alias_version": t.and_then(|t| t.alias.as_ref().map(|a| a.1)).unwrap_or(0),
            "record": t.and_then(|t| t.record.clone()),
            "newest_fence": t.map_or(0, |t| t.newest_fence),
            "collections": collections,
        })
    }
}

type Decision = (u16, Option<String>, u64, Option<u64>, Value);

fn decide(st: &mut State, policy: StorePolicy, op: StoreOp, req: &StoreRequest) -> Decision {
    let reject = |status: u16, why: String| (status, Some(why), req.fence, None, Value::Null);
    let tenant = st.tenants.entry(req.tenant.clone()).or_default();
    if op == StoreOp::BeginEpoch {
        tenant.newest_fence += 1;
        tenant.newest_token = Some(req.token.clone());
        return (200, None, tenant.newest_fence, None, Value::Null);
    }
    // Fencing first: a stale writer learns nothing else.
    let enforced = match policy {
        StorePolicy::Enforce => true,
        StorePolicy::Observe => false,
        // The store flaw: one operation slips past the fence check.
        StorePolicy::FlawedSkipsPersist => op != StoreOp::PersistRecord,
    };
    if enforced {
        if req.fence < tenant.newest_fence {
            return reject(409, format!("stale fence {} < newest {}", req.fence, tenant.newest_fence));
        }
        if req.fence == tenant.newest_fence && tenant.newest_token.as_ref().is_some_and(|t| *t != req.token) {
            return reject(409, format!("fence anomaly: fence {} already presented by another owner", req.fence));
        }
    }
    let Some(name) = req.collection.clone() else {
        return reject(400, format!("{op:?} needs a collection"));
    };
    let result = match op {
        StoreOp::CreateCollection => match st.collections.entry(name) {
            std::collections::btree_map::Entry::Occupied(e) => Err((409, format!("collection {} exists", e.key()))),
            std::collections::btree_map::Entry::Vacant(e) => {
                e.insert(Collection {
                    tenant: req.tenant.clone(),
                    node: req.node.clone(),
                    token: req.token.clone(),
                    fence: req.fence,
                    live: false,
                    points: 0,
                });
                Ok((None, Value::Null))
            }
        },
        StoreOp::Upsert => match st.collections.get_mut(&name) {
            None => Err((404, format!("no collection {name}"))),
            Some(c) if c.tenant != req.tenant => Err((400, format!("collection {name} belongs to another tenant"))),
            Some(c) => {
                c.points += req.points;
                Ok((None, Value::Null))
            }
        },
        StoreOp::SwitchAlias => match st.collections.get_mut(&name) {
            None => Err((404, format!("no collection {name}"))),
            Some(c) => {
                c.live = true;
                let tenant = st.tenants.entry(req.tenant.clone()).or_default();
                let version = match &tenant.alias {
                    Some((current, v)) if *current == name => *v, // repeated switch: idempotent
                    Some((_, v)) => v + 1,
                    None => 1,
                };
                tenant.alias = Some((name, version));
                Ok((Some(version), json!({ "alias_version": version })))
            }
        },
        StoreOp::PersistRecord => {
            let tenant = st.tenants.entry(req.tenant.clone()).or_default();
            tenant.record =
                Some(json!({ "collection": name, "node": req.node, "token": req.token, "fence": req.fence }));
            Ok((None, Value::Null))
        }
        StoreOp::DropCollection => {
            let live = st.tenants.get(&req.tenant).and_then(|t| t.alias.as_ref()).is_some_and(|(a, _)| *a == name);
            if live {
                Err((409, format!("collection {name} is the live alias target")))
            } else if st.collections.remove(&name).is_none() {
                Err((404, format!("no collection {name}")))
            } else {
                Ok((None, Value::Null))
            }
        }
        StoreOp::BeginEpoch => Ok((None, Value::Null)),
    };
    match result {
        Ok((alias_version, extra)) => {
            let tenant = st.tenants.entry(req.tenant.clone()).or_default();
            if req.fence >= tenant.newest_fence {
                tenant.newest_fence = req.fence;
                tenant.newest_token = Some(req.token.clone());
            }
            (200, None, req.fence, alias_version, extra)
        }
        Err((status, why)) => reject(status, why),
    }
}

/// The op a path names: `/v1/{op}`.
#[must_use]
pub fn op_from_path(path: &str) -> Option<StoreOp> {
    Some(match path.strip_prefix("/v1/")? {
        "epoch" => StoreOp::BeginEpoch,
        "create" => StoreOp::CreateCollection,
        "upsert" => StoreOp::Upsert,
        "alias" => StoreOp::SwitchAlias,
        "record" => StoreOp::PersistRecord,
        "drop" => StoreOp::DropCollection,
        _ => return None,
    })
}

/// The path of an op.
#[must_use]
pub fn op_path(op: StoreOp) -> &'static str {
    match op {
        StoreOp::BeginEpoch => "/v1/epoch",
        StoreOp::CreateCollection => "/v1/create",
        StoreOp::Upsert => "/v1/upsert",
        StoreOp::SwitchAlias => "/v1/alias",
        StoreOp::PersistRecord => "/v1/record",
        StoreOp::DropCollection => "/v1/drop",
    }
}

/// Serves the store's HTTP API on `listener` until `cancel` fires.
pub async fn serve(listener: TcpListener, store: Arc<Store>, cancel: CancellationToken) {
    let conns = TaskTracker::new();
    loop {
        let stream = tokio::select! {
            () = cancel.cancelled() => break,
            a = listener.accept() => match a {
                Ok((s, _)) => s,
                Err(e) => { warn!(error = %e, "store accept failed"); tokio::time::sleep(Duration::from_millis(10)).await; continue; }
            },
        };
        let store = store.clone();
        let stop = cancel.clone();
        conns.spawn(async move {
            let service = hyper::service::service_fn(move |req| handle(store.clone(), req));
            let conn = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service);
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                () = stop.cancelled() => conn.as_mut().graceful_shutdown(),
            }
        });
    }
    conns.close();
    let _ = tokio::time::timeout(Duration::from_secs(2), conns.wait()).await;
}

async fn handle(store: Arc<Store>, req: Request<Incoming>) -> Result<Response<Full<Bytes>>, std::convert::Infallible> {
    let (method, path, query) =
        (req.method().clone(), req.uri().path().to_owned(), req.uri().query().map(str::to_owned));
    let body = match Limited::new(req.into_body(), BODY_LIMIT).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return Ok(reply(400, &json!({ "error": format!("bad body: {e}") }))),
    };
    let (status, text, ndjson) = if method == hyper::Method::POST && path == "/v1/embed" {
        let (status, text) = crate::model::embed(store.model(), &body).await;
        (status, text, false)
    } else {
        route(&store, method.as_str(), &path, query.as_deref(), &body)
    };
    let mut r = Response::new(Full::new(Bytes::from(text)));
    *r.status_mut() = hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    let kind = if ndjson { "application/x-ndjson" } else { "application/json" };
    r.headers_mut().insert("content-type", hyper::header::HeaderValue::from_static(kind));
    Ok(r)
}

/// One request to the store, without HTTP: status, body, and whether the body is JSON lines (the
/// audit log). The HTTP shell and the simulation's store link both answer through this.
pub fn route(store: &Store, method: &str, path: &str, query: Option<&str>, body: &[u8]) -> (u16, String, bool) {
    let json = |status: u16, v: Value| (status, v.to_string(), false);
    match (method, path) {
        ("GET", "/v1/health") => {
            json(200, json!({ "ok": true, "audit_seq": store.audit_seq(), "model_seq": store.model().audit_seq() }))
        }
        ("GET", "/v1/audit") => (200, ndjson(&store.audit_after(after(query))), true),
        ("GET", "/v1/model/audit") => (200, ndjson(&store.model().audit_after(after(query))), true),
        ("GET", p) if p.starts_with("/v1/tenants/") => json(200, store.tenant_view(&p["/v1/tenants/".len()..])),
        ("POST", p) => match op_from_path(p) {
            None => json(404, json!({ "error": format!("no such operation {p}") })),
            Some(op) => match serde_json::from_slice::<StoreRequest>(body) {
                Ok(r) => {
                    let a = store.apply(op, &r);
                    json(a.status, a.body)
                }
                Err(e) => json(400, json!({ "error": format!("bad request body: {e}") })),
            },
        },
        _ => json(404, json!({ "error": format!("no route {method} {path}") })),
    }
}

/// `after=N` of a query (0 when absent).
fn after(query: Option<&str>) -> u64 {
    query.and_then(|q| q.strip_prefix("after=")).and_then(|n| n.parse().ok()).unwrap_or(0)
}

/// Records as JSON lines.
fn ndjson<T: serde::Serialize>(records: &[T]) -> String {
    records.iter().map(|r| serde_json::to_string(r).unwrap_or_default() + "\n").collect()
}

fn reply(status: u16, body: &Value) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body.to_string())));
    *r.status_mut() = hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert("content-type", hyper::header::HeaderValue::from_static("application/json"));
    r
}

#[cfg(test)]
mod tests;
