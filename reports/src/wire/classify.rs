//! What a witnessed Redis command did to a lease, read without the node's help: an acquire
//! (`SET key token NX PX ttl`, or a script that does that), a renewal (`PEXPIRE`, a script
//! extending the key), a release (`DEL`, a script deleting it), a check (`GET`), the fence
//! (`INCR`). A script is read by its body (`EVAL`, or `EVALSHA` of a body loaded on any link);
//! the token and the ttl are the arguments the script uses as the key's value and its expiry.
//! Whether it took effect is read from the reply: `OK`, `1` or `{1, ...}` did, nil, `0` or
//! `{0, ...}` did not, unless the script returns literals of its own (`~= ARGV[1] then return 1`
//! ... `return 0`: python-redis-lock's convention), which are then read its way. What cannot be
//! read is said so ([`Outcome::Unread`], [`Classified::unread`]), never guessed.

use std::collections::HashMap;

use super::lua::{self, Arg};
use super::{Resp, WireRecord, WireReply, WireRequest};

/// What a command does to the lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseOp {
    /// Takes the key only if free (`NX`): an acquire.
    Acquire,
    /// Extends the key's expiry: a renewal.
    Renew,
    /// Sets the key with an expiry whoever holds it, or after comparing the owner (aioredlock's
    /// one script for both): an acquire when the node holds no acquisition with that token, else
    /// a renewal.
    AcquireOrRenew,
    /// Deletes the key: a release.
    Release,
    /// Reads the key (`GET`, `PTTL`): an ownership check.
    Check,
    /// Bumps the fence counter.
    Fence,
    /// Touches the lease's keys in a way the witness cannot read (see `unread`).
    Unknown,
}

/// Whether the command took effect, from its reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// It did (`OK`, `1`, `{1, ...}`, or the script's own "done" literal).
    Done,
    /// It did not: the key was another's, or missing (nil, `0`, `{0, ...}`, the script's own
    /// "refused" literal).
    Refused,
    /// Redis answered an error (the script's `error_reply` included).
    Error(String),
    /// No reply came back from Redis.
    NoReply,
    /// A reply this reading cannot place.
    Unread(String),
}

impl Outcome {
    /// It took effect, or may have (an unread reply): the reading that cannot invent a loss.
    #[must_use]
    pub fn maybe_done(&self) -> bool {
        matches!(self, Outcome::Done | Outcome::Unread(_))
    }

    /// It certainly did not take effect and Redis said so (refused, or an error).
    #[must_use]
    pub fn refused(&self) -> bool {
        matches!(self, Outcome::Refused | Outcome::Error(_))
    }
}

/// A command as the lease sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Classified {
    /// What it does.
    pub op: LeaseOp,
    /// The token it writes or compares (none for a bare `PEXPIRE` or `DEL`).
    pub token: Option<String>,
    /// The expiry it sets, ms.
    pub ttl_ms: Option<u64>,
    /// Whether it took effect.
    pub outcome: Outcome,
    /// Why the op (or its token or ttl) could not be read.
    pub unread: Option<String>,
}

/// The Lua scripts the witness saw loaded or run on any link: SHA1 -> the body, read once.
#[derive(Debug, Default, Clone)]
pub struct Scripts(HashMap<String, std::sync::Arc<Body>>);

/// A script's body and what reading it found.
#[derive(Debug)]
pub struct Body {
    text: String,
    calls: Vec<lua::Call>,
    /// The `ARGV[j]` its key's value is compared with.
    compared: Option<usize>,
    /// Its own (refused, done) reply literals.
    literals: Option<(i64, i64)>,
}

impl Body {
    fn read(text: &str) -> Self {
        Self {
            text: text.to_owned(),
            calls: lua::calls(text),
            compared: lua::compared_argv(text),
            literals: lua::literal_returns(text),
        }
    }
}

impl Scripts {
    /// Every body loaded (`SCRIPT LOAD`, its reply the SHA1) or run (`EVAL`) in `records`.
    #[must_use]
    pub fn learn<'a>(records: impl IntoIterator<Item = &'a WireRecord>) -> Self {
        let mut out = HashMap::new();
        for r in records {
            let WireRequest::Redis { args } = &r.request else { continue };
            let cmd = args.first().map(|c| c.to_ascii_uppercase());
            match (cmd.as_deref(), args.get(1).map(|a| a.to_ascii_uppercase())) {
                (Some("SCRIPT"), Some(sub)) if sub == "LOAD" => {
                    let Some(body) = args.get(2) else { continue };
                    let sha = match &r.reply {
                        Some(WireReply::Redis(Resp::Bulk(Some(sha)))) => sha.to_ascii_lowercase(),
                        _ => sha1_hex(body),
                    };
                    out.entry(sha).or_insert_with(|| std::sync::Arc::new(Body::read(body)));
                }
                (Some("EVAL" | "EVAL_RO"), Some(_)) => {
                    let body = &args[1];
                    out.entry(sha1_hex(body)).or_insert_with(|| std::sync::Arc::new(Body::read(body)));
                }
                _ => {}
            }
        }
        Self(out)
    }

    /// These scripts and `other`'s.
    #[must_use]
    pub fn merged(mut self, other: Self) -> Self {
        self.0.extend(other.0);
        self
    }

    /// Keeps the body a request carries (`EVAL`'s, `SCRIPT LOAD`'s), before its reply: a witness
    /// learning scripts as they pass.
    pub fn heard(&mut self, request: &WireRequest) {
        let WireRequest::Redis { args } = request else { return };
        let cmd = args.first().map(|c| c.to_ascii_uppercase());
        match (cmd.as_deref(), args.get(1)) {
            (Some("EVAL" | "EVAL_RO"), Some(body)) => self.insert(body),
            (Some("SCRIPT"), Some(sub)) if sub.eq_ignore_ascii_case("LOAD") => {
                if let Some(body) = args.get(2) {
                    self.insert(body);
                }
            }
            _ => {}
        }
    }

    /// Keeps `body` under its SHA1 (a witness learning scripts as they pass).
    pub fn insert(&mut self, body: &str) {
        self.0.entry(sha1_hex(body)).or_insert_with(|| std::sync::Arc::new(Body::read(body)));
    }

    /// A script by its SHA1.
    #[must_use]
    pub fn body(&self, sha: &str) -> Option<&Body> {
        match self.0.get(sha) {
            Some(b) => Some(b),
            None => self.0.get(&sha.to_ascii_lowercase()).map(|b| &**b),
        }
    }

    /// The body of a script by its SHA1, as text.
    #[must_use]
    pub fn text(&self, sha: &str) -> Option<&str> {
        self.body(sha).map(|b| b.text.as_str())
    }
}

fn sha1_hex(body: &str) -> String {
    sha1_smol::Sha1::from(body.as_bytes()).digest().to_string()
}

/// Whether a command touches the lease key or the fence key (or loads a script): the records a
/// history keeps of a Redis link.
#[must_use]
pub fn touches(args: &[String], lease_key: &str, fence_key: &str) -> bool {
    let cmd = args.first().map(|c| c.to_ascii_uppercase());
    cmd.as_deref() == Some("SCRIPT") || args.iter().skip(1).any(|a| a == lease_key || a == fence_key)
}

/// What the Redis command `args` with `reply` did to the lease kept under `lease_key` (its fence
/// counter `fence_key`); `None` when it touches neither (or is no Redis command).
#[must_use]
pub fn classify(r: &WireRecord, lease_key: &str, fence_key: &str, scripts: &Scripts) -> Option<Classified> {
    let WireRequest::Redis { args } = &r.request else { return None };
    let cmd = args.first()?.to_ascii_uppercase();
    let reply = match &r.reply {
        Some(WireReply::Redis(v)) => Some(v),
        _ => None,
    };
    let shape = match cmd.as_str() {
        "EVAL" | "EVAL_RO" => {
            let text = args.get(1)?;
            match scripts.body(&sha1_hex(text)) {
                Some(b) => script(args, Some(b), lease_key, fence_key)?,
                None => script(args, Some(&Body::read(text)), lease_key, fence_key)?,
            }
        }
        "EVALSHA" | "EVALSHA_RO" => match scripts.body(args.get(1)?) {
            // Redis knew no such script: it ran nothing (the client loads it and tries again).
            None if matches!(reply, Some(Resp::Error(e)) if e.starts_with("NOSCRIPT")) => return None,
            // Never forwarded (a blackholed link dropped it) and never answered: it reached no
            // Redis and ran nothing, whatever the script (the first renewal of a run, sent into a
            // partition, is the one whose body nobody has loaded yet).
            None if !r.forwarded && r.reply.is_none() => return None,
            body => script(args, body, lease_key, fence_key)?,
        },
        _ => direct(&cmd, args, lease_key, fence_key)?,
    };
    let outcome = match reply {
        None => Outcome::NoReply,
        Some(v) => outcome(shape.op, v, shape.literals),
    };
    Some(Classified { op: shape.op, token: shape.token, ttl_ms: shape.ttl_ms, outcome, unread: shape.unread })
}

/// What record `at` of one link does to `lease_key`, before its reply: its op, an acquire-or-renew
/// told apart by the link's earlier records (`before`, any order): a renewal when one of them
/// acquired the key with the same token and took effect, else an acquire. `None` when it does not
/// touch the lease. The proxy's aimed toxics and the simulation's aimed faults read commands so.
#[must_use]
pub fn lease_op<'a>(
    at: &WireRecord,
    mut before: impl Iterator<Item = &'a WireRecord>,
    lease_key: &str,
    scripts: &Scripts,
) -> Option<LeaseOp> {
    let c = classify(at, lease_key, "", scripts)?;
    if c.op != LeaseOp::AcquireOrRenew {
        return Some(c.op);
    }
    let renewal = before.any(|r| {
        classify(r, lease_key, "", scripts).is_some_and(|e| {
            matches!(e.op, LeaseOp::Acquire | LeaseOp::AcquireOrRenew)
                && e.outcome == Outcome::Done
                && e.token == c.token
        })
    });
    Some(if renewal { LeaseOp::Renew } else { LeaseOp::Acquire })
}

/// What a command is, before its reply.
struct Shape {
    op: LeaseOp,
    token: Option<String>,
    ttl_ms: Option<u64>,
    /// A script's own (refused, done) literals.
    literals: Option<(i64, i64)>,
    unread: Option<String>,
}

impl Shape {
    fn new(op: LeaseOp) -> Self {
        Self { op, token: None, ttl_ms: None, literals: None, unread: None }
    }
    fn unknown(why: impl Into<String>) -> Self {
        Self { unread: Some(why.into()), ..Self::new(LeaseOp::Unknown) }
    }
}

/// A plain command on the lease key or the fence counter.
fn direct(cmd: &str, args: &[String], lease: &str, fence: &str) -> Option<Shape> {
    let key = args.get(1).map(String::as_str);
    if key == Some(fence) {
        return Some(Shape::new(if cmd.starts_with("INCR") { LeaseOp::Fence } else { LeaseOp::Check }));
    }
    if !args.iter().skip(1).any(|a| a == lease) {
        return None;
    }
    let opts: Vec<String> = args.iter().skip(3).map(|a| a.to_ascii_uppercase()).collect();
    let ttl_after = |opt: &str, unit: u64| {
        let i = opts.iter().position(|o| o == opt)?;
        ms(args.get(3 + i + 1)?, unit)
    };
    let mut s = match cmd {
        "SET" if opts.iter().any(|o| o == "NX") => Shape::new(LeaseOp::Acquire),
        "SET" if opts.iter().any(|o| o == "XX") => Shape::new(LeaseOp::Renew),
        "SET" | "SETEX" | "PSETEX" => Shape::new(LeaseOp::AcquireOrRenew),
        "SETNX" => Shape::new(LeaseOp::Acquire),
        "PEXPIRE" | "EXPIRE" | "GETEX" => Shape::new(LeaseOp::Renew),
        "DEL" | "UNLINK" | "GETDEL" => Shape::new(LeaseOp::Release),
        "GET" | "PTTL" | "TTL" | "EXISTS" => Shape::new(LeaseOp::Check),
        other => Shape::unknown(format!("{other} on the lease key is no lease command the witness reads")),
    };
    match cmd {
        "SET" | "SETNX" => {
            s.token = args.get(2).cloned();
            s.ttl_ms = ttl_after("PX", 1).or_else(|| ttl_after("EX", 1000));
        }
        "SETEX" | "PSETEX" => {
            s.token = args.get(3).cloned();
            s.ttl_ms = args.get(2).and_then(|t| ms(t, if cmd == "SETEX" { 1000 } else { 1 }));
        }
        "PEXPIRE" | "EXPIRE" => s.ttl_ms = args.get(2).and_then(|t| ms(t, if cmd == "EXPIRE" { 1000 } else { 1 })),
        "GETEX" => {
            s.ttl_ms = args.iter().position(|a| a.eq_ignore_ascii_case("PX")).and_then(|i| ms(args.get(i + 1)?, 1))
        }
        _ => {}
    }
    Some(s)
}

/// `text` as ms, at `unit` ms each (checked: a number from a file).
fn ms(text: &str, unit: u64) -> Option<u64> {
    text.trim().parse::<u64>().ok()?.checked_mul(unit)
}

/// An `EVAL`/`EVALSHA` with `body` (None: a SHA1 never loaded where the witness saw it).
fn script(args: &[String], body: Option<&Body>, lease: &str, fence: &str) -> Option<Shape> {
    let numkeys: usize = args.get(2)?.parse().ok()?;
    let keys = args.get(3..3usize.checked_add(numkeys)?.min(args.len()))?;
    let argv = args.get(3 + keys.len()..).unwrap_or(&[]);
    let lease_at = keys.iter().position(|k| k == lease).map(|i| i + 1);
    let fence_at = keys.iter().position(|k| k == fence).map(|i| i + 1);
    if lease_at.is_none() && fence_at.is_none() {
        return None;
    }
    let Some(body) = body else {
        return Some(Shape::unknown("a script whose body the witness never saw loaded (EVALSHA of an unknown SHA1)"));
    };
    let Some(k) = lease_at else {
        let incr = body.calls.iter().any(|c| c.cmd.starts_with("INCR") && fence_at.is_some_and(|f| c.on(f)));
        return Some(Shape::new(if incr { LeaseOp::Fence } else { LeaseOp::Check }));
    };
    let mut s = script_shape(&body.calls, k, &body.text);
    let value = |a: Option<&Arg>| match a {
        Some(Arg::Argv(j)) => argv.get(j - 1).cloned(),
        _ => None,
    };
    s.shape.token = value(s.token.as_ref()).or_else(|| body.compared.and_then(|j| argv.get(j - 1).cloned()));
    s.shape.ttl_ms = s.ttl.as_ref().and_then(|(a, unit)| ms(value(Some(a))?.as_str(), *unit));
    if s.shape.op != LeaseOp::Check && s.shape.op != LeaseOp::Unknown && s.shape.ttl_ms.is_none() && s.ttl.is_some() {
        s.shape.unread = Some("the script's expiry argument is not a number of ms or s".into());
    }
    s.shape.literals = body.literals;
    Some(s.shape)
}

/// A script's shape, with the arguments its token and ttl come from.
struct ScriptShape {
    shape: Shape,
    token: Option<Arg>,
    /// The ttl's argument and its unit in ms.
    ttl: Option<(Arg, u64)>,
}

/// What the calls on `KEYS[k]` make of the script: an acquire (`SET ... NX`, `SETNX`) first,
/// then a set with an expiry, an expiry, a delete, a read.
fn script_shape(calls: &[lua::Call], k: usize, body: &str) -> ScriptShape {
    let on: Vec<&lua::Call> = calls.iter().filter(|c| c.on(k)).collect();
    let find = |cmds: &[&str]| on.iter().copied().find(|c| cmds.contains(&c.cmd.as_str()));
    let expiry = |c: &lua::Call| match c.cmd.as_str() {
        "PEXPIRE" => c.args.get(1).cloned().map(|a| (a, 1)),
        "EXPIRE" => c.args.get(1).cloned().map(|a| (a, 1000)),
        _ => c.after("PX").cloned().map(|a| (a, 1)).or_else(|| c.after("EX").cloned().map(|a| (a, 1000))),
    };
    let with = |op, token: Option<Arg>, ttl| ScriptShape { shape: Shape::new(op), token, ttl };
    if let Some(set) = find(&["SET"]).filter(|c| c.has("NX")).or_else(|| find(&["SETNX"])) {
        let ttl = expiry(set).or_else(|| find(&["PEXPIRE", "EXPIRE"]).and_then(expiry));
        return with(LeaseOp::Acquire, set.args.get(1).cloned(), ttl);
    }
    if let Some(set) = find(&["SET"]).filter(|c| c.has("PX") || c.has("EX")) {
        let op = if set.has("XX") { LeaseOp::Renew } else { LeaseOp::AcquireOrRenew };
        return with(op, set.args.get(1).cloned(), expiry(set));
    }
    if let Some(ex) = find(&["PEXPIRE", "EXPIRE"]) {
        return with(LeaseOp::Renew, None, expiry(ex));
    }
    if find(&["DEL", "UNLINK", "GETDEL"]).is_some() {
        return with(LeaseOp::Release, None, None);
    }
    if find(&["GET", "PTTL", "TTL", "EXISTS"]).is_some() {
        return with(LeaseOp::Check, None, None);
    }
    let why = if body.contains(&format!("KEYS[{k}]")) {
        "the script works on the lease key with calls the witness does not read as a lease's"
    } else {
        "the script reaches the lease key only through an expression the witness does not read"
    };
    ScriptShape { shape: Shape::unknown(why), token: None, ttl: None }
}

/// Whether `op` took effect, read from `reply` (a script's own literals first).
fn outcome(op: LeaseOp, reply: &Resp, literals: Option<(i64, i64)>) -> Outcome {
    if let Resp::Error(e) = reply {
        return Outcome::Error(e.clone());
    }
    if matches!(op, LeaseOp::Check | LeaseOp::Fence) {
        return Outcome::Done;
    }
    if let (Some((refused, done)), Some(n)) = (literals, reply.int()) {
        return match n {
            n if n == done => Outcome::Done,
            n if n == refused => Outcome::Refused,
            n => Outcome::Unread(format!(
                "the script answered {n}, neither its done ({done}) nor its refused ({refused})"
            )),
        };
    }
    match reply {
        Resp::Simple(s) if s.eq_ignore_ascii_case("QUEUED") => Outcome::Unread("queued in a transaction".into()),
        Resp::Simple(_) | Resp::Bulk(Some(_)) => Outcome::Done,
        Resp::Bulk(None) | Resp::Array(None) | Resp::Int(0) => Outcome::Refused,
        Resp::Int(1) => Outcome::Done,
        Resp::Int(n) if op == LeaseOp::Release && *n > 1 => Outcome::Done,
        Resp::Array(Some(items)) => match items.first() {
            Some(Resp::Int(1)) => Outcome::Done,
            Some(Resp::Int(0) | Resp::Bulk(None)) | None => Outcome::Refused,
            Some(other) => Outcome::Unread(format!("a reply array starting with {other:?}")),
        },
        other => Outcome::Unread(format!("a reply of {other:?}")),
    }
}

#[cfg(test)]
mod tests;
