//! The recorder: the history being written while a run runs. Every source (the node collector
//! below, the timeline's fault lines, the observer, the environment's watchers) appends to one
//! [`Recorder`] in arrival order; at the end the store's audit log and the snapshot close it.

use std::sync::{Arc, Mutex, PoisonError};

use leasequake_reports::history::HistoryLine;
use tokio::sync::{broadcast, mpsc};

use crate::env::Environment;
use crate::error::HarnessError;
use crate::holders::Holders;
use crate::supervisor::Received;

/// The history of a run in progress (cheap to clone: every clone appends to the same lines).
#[derive(Clone, Default)]
pub(crate) struct Recorder(Arc<Mutex<Vec<HistoryLine>>>);

impl Recorder {
    /// A history that starts with `header`.
    pub fn new(header: HistoryLine) -> Self {
        Self(Arc::new(Mutex::new(vec![header])))
    }

    /// Appends one line.
    pub fn push(&self, line: HistoryLine) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).push(line);
    }

    /// Every line so far, taken out (the history is then complete).
    pub fn take(&self) -> Vec<HistoryLine> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// The node collector: every node line into the history (and into the run's view of the lease:
/// its declared key, its tokens and current owner), then to whoever listens (the router, the probes that wait for one). Ends
/// when every sender is gone (the nodes stopped).
pub(crate) async fn collect(
    mut rx: mpsc::Receiver<Received>,
    rec: Recorder,
    lease: Arc<Holders>,
    events: broadcast::Sender<Arc<Received>>,
) {
    while let Some(r) = rx.recv().await {
        let r = Arc::new(r);
        let line = match &r.line {
            Ok(event) => {
                lease.saw(&r.node, &event.kind);
                HistoryLine::Node {
                    node: r.node.clone(),
                    incarnation: r.incarnation,
                    received_ns: r.received_ns,
                    event: event.clone(),
                }
            }
            Err(g) => HistoryLine::Garbage {
                node: r.node.clone(),
                received_ns: r.received_ns,
                raw: g.raw.clone(),
                why: g.why.clone(),
            },
        };
        rec.push(line);
        let _ = events.send(r); // nobody listening is fine
    }
}

/// The store's audit log since `audit_after`, as history lines. A log the store would not give,
/// or a record that does not parse, is an error: the history must hold every record or the run
/// proves nothing (an audit cut short would be sealed as whole, and a lost write never judged).
pub(crate) async fn read_audit(env: &Environment, audit_after: u64) -> Result<Vec<HistoryLine>, HarnessError> {
    let text = read_log(env, "the store's audit log", &format!("/v1/audit?after={audit_after}")).await?;
    audit_lines(&text).map_err(|e| HarnessError::Environment { detail: format!("the store's audit log: {e}") })
}

/// The model service's audit log since `model_after`, as history lines (the same rules as the
/// store's: all of it, or an error).
pub(crate) async fn read_model(env: &Environment, model_after: u64) -> Result<Vec<HistoryLine>, HarnessError> {
    let text = read_log(env, "the model service's audit log", &format!("/v1/model/audit?after={model_after}")).await?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str(l).map(HistoryLine::Model).map_err(|e| HarnessError::Environment {
                detail: format!("the model service's audit log: record {} does not parse ({e})", i + 1),
            })
        })
        .collect()
}

async fn read_log(env: &Environment, what: &str, path: &str) -> Result<String, HarnessError> {
    let bad = |detail: String| HarnessError::Environment { detail: format!("{what}: {detail}") };
    let (status, text) = leasequake_toxiproxy::http::exchange(&env.store_addr, "GET", path, None)
        .await
        .map_err(|e| bad(format!("cannot read it: {e}")))?;
    if status != 200 {
        return Err(bad(format!("GET {path} answered {status}")));
    }
    Ok(text)
}

/// The audit log's JSON lines as history lines; the first that does not parse is an error.
fn audit_lines(text: &str) -> Result<Vec<HistoryLine>, String> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str(l)
                .map(HistoryLine::Audit)
                .map_err(|e| format!("record {} does not parse ({e})", i + 1))
        })
        .collect()
}

/// Every record each of `links` witnessed, as history lines, and the links whose records are
/// not all there (dropped by the proxy for room, or not readable), each with why. Pages through
/// the proxy's witness; bounded by what each proxy keeps.
pub(crate) async fn read_wire(
    proxy: &leasequake_toxiproxy::Client,
    links: &[String],
) -> (Vec<HistoryLine>, Vec<String>) {
    let mut lines = Vec::new();
    let mut gaps = Vec::new();
    for link in links {
        let mut after = 0;
        // Bounded: every page moves `after` on, and a proxy keeps at most RECORDS_MAX records.
        loop {
            let page = match proxy.witness(link, after).await {
                Ok(Some(page)) => page,
                Ok(None) => {
                    gaps.push(format!("{link}: the proxy has no witness"));
                    break;
                }
                Err(e) => {
                    gaps.push(format!("{link}: its records could not be read ({e})"));
                    break;
                }
            };
            if after == 0 && page.first > 1 {
                gaps.push(format!("{link}: the proxy dropped its first {} records for room", page.first - 1));
            }
            let Some(last) = page.records.last().map(|r| r.seq) else { break };
            after = last;
            lines.extend(page.records.into_iter().map(HistoryLine::Wire));
            if after + 1 >= page.next {
                break;
            }
        }
    }
    (lines, gaps)
}

/// The tenant's collections that never went live (a pipeline's temporary collection left behind).
pub(crate) async fn temporary_collections_left(env: &Environment, tenant: &str) -> Vec<String> {
    let view =
        leasequake_toxiproxy::http::exchange(&env.store_addr, "GET", &format!("/v1/tenants/{tenant}"), None).await.ok();
    view.and_then(|(_, b)| serde_json::from_str::<serde_json::Value>(&b).ok())
        .and_then(|v| v["collections"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter(|c| c["live"] == false)
        .filter_map(|c| c["name"].as_str().map(str::to_owned))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::audit_lines;

    #[test]
    fn an_audit_record_that_does_not_parse_is_an_error_never_a_shorter_log() {
        let good = r#"{"seq":1,"mono_ns":5,"tenant":"t","node":"n1","token":"a","fence":1,"op":"upsert","collection":"c","accepted":true,"reason":null,"alias_version":null,"call":1}"#;
        assert_eq!(audit_lines(&format!("{good}\n\n")).map(|l| l.len()), Ok(1));
        let cut = &good[..good.len() - 9];
        let e = audit_lines(&format!("{good}\n{cut}\n")).unwrap_err();
        assert!(e.contains("record 2 does not parse"), "{e}");
    }
}
