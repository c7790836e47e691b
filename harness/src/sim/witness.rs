//! The simulation's witness: what each node sent on its links (to the Redis model, the store and
//! the model service) and what came back, recorded as the container lane's proxy records it
//! (`reports::wire`): the request when the node sends it, before the link's faults; the reply when
//! it reaches the node (none when a fault swallowed it). Both lanes write the same wire lines, so
//! one checker judges them from what the nodes did.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use leasequake_reports::history::HistoryLine;
use leasequake_reports::wire::{lease_op, LeaseOp, Resp, Scripts, WireRecord, WireReply, WireRequest, ARG_MAX};
use redis::Value;

use super::env::VClock;

/// Every link's records, in the order sent.
pub(super) struct Witness {
    clock: VClock,
    links: Mutex<BTreeMap<String, Vec<WireRecord>>>,
    /// The Lua scripts seen run or loaded on any link (the model keeps one script cache).
    scripts: Mutex<Scripts>,
}

/// A request recorded: its link and place, for its reply.
pub(super) struct Sent {
    link: String,
    index: usize,
}

impl Witness {
    pub fn new(clock: VClock) -> Self {
        Self { clock, links: Mutex::default(), scripts: Mutex::default() }
    }

    /// Records a request sent now on `link`; `forwarded`: whether it went on (a reset or
    /// blackholed link stops it).
    pub fn sent(&self, link: &str, request: WireRequest, forwarded: bool) -> Sent {
        self.learn(&request);
        let mut links = self.links.lock().unwrap_or_else(PoisonError::into_inner);
        let records = links.entry(link.to_owned()).or_default();
        let seq = records.len() as u64 + 1;
        records.push(WireRecord {
            seq,
            link: link.to_owned(),
            conn: 1,
            sent_ns: self.clock.now_ns(),
            forwarded,
            request,
            reply_ns: None,
            reply: None,
            held: false,
            lost: false,
        });
        Sent { link: link.to_owned(), index: records.len() - 1 }
    }

    /// Records the reply to `sent`, reaching the node now (`delivered`) or swallowed on the way.
    pub fn answered(&self, sent: &Sent, reply: WireReply, delivered: bool) {
        let now = self.clock.now_ns();
        let mut links = self.links.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(r) = links.get_mut(&sent.link).and_then(|rs| rs.get_mut(sent.index)) {
            r.reply = Some(reply);
            r.reply_ns = delivered.then_some(now);
        }
    }

    /// Marks the reply to `sent` as lost on purpose (an aimed `lose_replies`), as the proxy does.
    pub fn lost(&self, sent: &Sent) {
        let mut links = self.links.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(r) = links.get_mut(&sent.link).and_then(|rs| rs.get_mut(sent.index)) {
            r.lost = r.reply_ns.is_none();
        }
    }

    /// What `request`, about to be sent on `link`, does to `lease_key`, read as the proxy reads
    /// it (`reports::wire::lease_op`, from the link's earlier records).
    pub fn lease_op(&self, link: &str, request: &WireRequest, lease_key: &str) -> Option<LeaseOp> {
        let scripts = self.scripts.lock().unwrap_or_else(PoisonError::into_inner);
        let links = self.links.lock().unwrap_or_else(PoisonError::into_inner);
        let at = WireRecord {
            seq: 0,
            link: link.to_owned(),
            conn: 1,
            sent_ns: 0,
            forwarded: true,
            request: request.clone(),
            reply_ns: None,
            reply: None,
            held: false,
            lost: false,
        };
        lease_op(&at, links.get(link).into_iter().flatten(), lease_key, &scripts)
    }

    fn learn(&self, request: &WireRequest) {
        self.scripts.lock().unwrap_or_else(PoisonError::into_inner).heard(request);
    }

    /// Every record as history lines, link by link in the order sent (taken out: the world is
    /// over).
    pub fn take_lines(&self) -> Vec<HistoryLine> {
        let links = std::mem::take(&mut *self.links.lock().unwrap_or_else(PoisonError::into_inner));
        links.into_values().flatten().map(HistoryLine::Wire).collect()
    }
}

/// A Redis reply as the witness records it.
pub(super) fn resp(v: &Value) -> Resp {
    let text = |b: &[u8]| leasequake_reports::wire::text(b);
    match v {
        Value::Nil => Resp::Bulk(None),
        Value::Int(n) => Resp::Int(*n),
        Value::BulkString(b) => Resp::Bulk(Some(text(b))),
        Value::Array(items) | Value::Set(items) => Resp::Array(Some(items.iter().take(16).map(resp).collect())),
        Value::SimpleString(s) => Resp::Simple(leasequake_reports::wire::cut(s, ARG_MAX)),
        Value::Okay => Resp::Simple("OK".into()),
        Value::Boolean(b) => Resp::Int(i64::from(*b)),
        Value::ServerError(e) => {
            let text = match e.details() {
                Some(d) => format!("{} {d}", e.code()),
                None => e.code().to_owned(),
            };
            Resp::Error(leasequake_reports::wire::cut(&text, ARG_MAX))
        }
        other => Resp::Other(leasequake_reports::wire::cut(&format!("{other:?}"), ARG_MAX)),
    }
}
