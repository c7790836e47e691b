//! What the fault proxy witnessed on a node's links (history version 7): one [`WireRecord`] per
//! request a node sent through its proxy (a Redis command, an HTTP request to the store or the
//! model service) with the reply that came back, each stamped by the proxy on the shared
//! CLOCK_MONOTONIC: the request when its first byte was read from the node, before any toxic (the
//! node sent it no later); the reply when the proxy began to write its last chunk back to the
//! node, after every toxic (the node read it no earlier). Evidence the node
//! cannot shape: the checker judges the wire properties from it and checks the node's own reports
//! against it.
//!
//! Recorded, never more: a Redis command's arguments only for the commands a lease uses
//! ([`RECORDED_COMMANDS`]; any other command keeps its name alone, so `AUTH`, `HELLO`, `CONFIG`
//! and `ACL` never carry a secret into a record), each argument cut at [`ARG_MAX`] bytes (a Lua
//! script's body at [`SCRIPT_MAX`]); of an HTTP request its method, path and the lease's fields
//! of its JSON body (token, fence, call, node, batch), never headers or points. `classify` reads
//! what a command does to the lease.

use serde::{Deserialize, Serialize};

pub mod classify;
mod lua;

pub use classify::{classify, lease_op, touches, Classified, LeaseOp, Outcome, Scripts};

/// The longest argument kept, in bytes (the rest is cut, with `…` appended).
pub const ARG_MAX: usize = 512;
/// The longest Lua script body kept (`EVAL`, `SCRIPT LOAD`), in bytes.
pub const SCRIPT_MAX: usize = 16 * 1024;
/// The most arguments kept of one command.
pub const ARGS_MAX: usize = 64;

/// The Redis commands whose arguments are recorded (upper case); of any other command only the
/// name. A lease's commands, its scripts and their loading, its transactions.
pub const RECORDED_COMMANDS: [&str; 29] = [
    "SET",
    "SETNX",
    "SETEX",
    "PSETEX",
    "GET",
    "GETDEL",
    "GETEX",
    "DEL",
    "UNLINK",
    "EXISTS",
    "PEXPIRE",
    "EXPIRE",
    "PEXPIREAT",
    "EXPIREAT",
    "PERSIST",
    "PTTL",
    "TTL",
    "INCR",
    "INCRBY",
    "EVAL",
    "EVALSHA",
    "EVAL_RO",
    "EVALSHA_RO",
    "SCRIPT",
    "WAIT",
    "MULTI",
    "EXEC",
    "WATCH",
    "UNWATCH",
];

/// One request a node sent through its proxy, and its reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireRecord {
    /// The witness's own sequence, gap-free per proxy server (the run's records follow
    /// `header.wire_after`).
    pub seq: u64,
    /// The proxy the request went through: `n1-redis`, `n1-store`, `n1-model`.
    pub link: String,
    /// The client connection, numbered by the proxy server.
    pub conn: u64,
    /// CLOCK_MONOTONIC when the request's first byte was read from the node, ns (before toxics).
    pub sent_ns: u64,
    /// Whether the request went on to the upstream (a blackhole drops it).
    pub forwarded: bool,
    /// What was asked.
    pub request: WireRequest,
    /// CLOCK_MONOTONIC when the proxy began writing the reply's last chunk to the node, ns (after
    /// toxics: the node cannot have read it before); absent when no reply reached it (lost,
    /// dropped, or the connection ended first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_ns: Option<u64>,
    /// What the upstream answered, delivered or not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<WireReply>,
    /// The proxy held the request (a `hold` toxic: a stalled renewal) before it went on.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub held: bool,
    /// The proxy dropped its reply on purpose and closed the connection (an aimed
    /// `lose_replies`): the command ran, the node never heard.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub lost: bool,
}

impl WireRecord {
    /// The node whose link this is (`n1` of `n1-redis`).
    #[must_use]
    pub fn node(&self) -> &str {
        self.link.rsplit_once('-').map_or(&self.link, |(node, _)| node)
    }

    /// Which of the node's links (`redis` of `n1-redis`).
    #[must_use]
    pub fn link_kind(&self) -> &str {
        self.link.rsplit_once('-').map_or("", |(_, kind)| kind)
    }
}

/// A request as the witness read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum WireRequest {
    /// A Redis command: its name and (for [`RECORDED_COMMANDS`]) its arguments.
    Redis {
        /// The command and its arguments, as text (lossy UTF-8), each cut at [`ARG_MAX`].
        args: Vec<String>,
    },
    /// An HTTP request: method, path and the lease's fields of its JSON body.
    Http {
        /// `POST`, `GET`, ...
        method: String,
        /// The path, without the query.
        path: String,
        /// The body's `token`, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        token: Option<String>,
        /// The body's `fence`, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fence: Option<u64>,
        /// The body's `call`, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call: Option<u64>,
        /// The body's `batch`, if any (model calls).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        batch: Option<u64>,
    },
    /// Bytes the witness could not read as the link's protocol: it records nothing more of this
    /// connection (the wire properties of its node are then judged on what was read, and say so).
    Unreadable {
        /// Why.
        why: String,
    },
}

/// A reply as the witness read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum WireReply {
    /// A Redis reply.
    Redis(Resp),
    /// An HTTP response's status.
    Http {
        /// 200, 409, ...
        status: u16,
    },
}

/// A RESP value (RESP2 and the RESP3 types), strings cut at [`ARG_MAX`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Resp {
    /// `+OK`.
    Simple(String),
    /// `-ERR ...` (and RESP3's blob errors).
    Error(String),
    /// `:1` (and RESP3's booleans as 0/1).
    Int(i64),
    /// `$n` bulk string, or null (`$-1`, RESP3's `_`).
    Bulk(Option<String>),
    /// `*n` array (RESP3 sets and maps flattened), or null (`*-1`).
    Array(Option<Vec<Resp>>),
    /// RESP3 doubles, big numbers and verbatim strings, as their text.
    Other(String),
}

/// Lossy UTF-8, cut at [`ARG_MAX`] bytes (on a character boundary, with `…` appended).
#[must_use]
pub fn text(b: &[u8]) -> String {
    cut(&String::from_utf8_lossy(b), ARG_MAX)
}

/// `s` cut at `max` bytes on a character boundary, `…` appended when cut.
#[must_use]
pub fn cut(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// A Redis command as a witness records it: its name, and its arguments only for the
/// [`RECORDED_COMMANDS`] (so no `AUTH` or `HELLO` password is ever kept); a script body cut at
/// [`SCRIPT_MAX`], others at [`ARG_MAX`], at most [`ARGS_MAX`] of them.
#[must_use]
pub fn recorded_command(args: &[Vec<u8>]) -> WireRequest {
    let name = args.first().map(|a| text(a).to_ascii_uppercase()).unwrap_or_default();
    if !RECORDED_COMMANDS.contains(&name.as_str()) {
        return WireRequest::Redis { args: vec![name] };
    }
    let script_at = match name.as_str() {
        "EVAL" | "EVAL_RO" => Some(1),
        "SCRIPT" => Some(2),
        _ => None,
    };
    let args = args
        .iter()
        .take(ARGS_MAX)
        .enumerate()
        .map(|(i, a)| match script_at {
            Some(at) if at == i => cut(&String::from_utf8_lossy(a), SCRIPT_MAX),
            _ => text(a),
        })
        .collect();
    WireRequest::Redis { args }
}

/// The lease's fields of a store or model request's JSON body; every other field ignored.
#[derive(Deserialize, Default)]
struct Fields {
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    fence: Option<u64>,
    #[serde(default)]
    call: Option<u64>,
    #[serde(default)]
    batch: Option<u64>,
}

/// An HTTP request as a witness records it: method, path (no query) and the lease's fields of a
/// JSON `body` (none read from a body that is not JSON).
#[must_use]
pub fn http_request(method: &str, path: &str, body: &[u8]) -> WireRequest {
    let fields = serde_json::from_slice::<Fields>(body).unwrap_or_default();
    WireRequest::Http {
        method: cut(method, 16),
        path: cut(path.split('?').next().unwrap_or_default(), 256),
        token: fields.token.map(|t| cut(&t, 256)),
        fence: fields.fence,
        call: fields.call,
        batch: fields.batch,
    }
}

impl Resp {
    /// The reply as an integer, if it is one.
    #[must_use]
    pub fn int(&self) -> Option<i64> {
        match self {
            Resp::Int(n) => Some(*n),
            _ => None,
        }
    }
}
