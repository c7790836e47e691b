//! One instance's data: string keys with absolute expiry stamps on the instance's own clock, and
//! the commands the lease, the node and the observer use. A primary expires a key lazily when it
//! is touched (and replicates the `DEL`); a replica never expires on its own: it hides a key past
//! its stamp from readers and waits for the primary's `DEL`, as Redis does.

use std::collections::BTreeMap;

use super::reply::Reply;

/// An instance's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Takes writes, expires keys, sends its effects to replicas.
    Primary,
    /// Read-only for clients; applies the primary's effects.
    Replica,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    value: Vec<u8>,
    /// Absolute, ms on the instance's clock.
    expires_at_ms: Option<u64>,
}

/// The keys of one instance and its outgoing replication stream.
#[derive(Debug, Clone)]
pub struct Keyspace {
    keys: BTreeMap<Vec<u8>, Entry>,
    pub(super) role: Role,
    /// Effects to send to replicas, each a command with absolute expiry stamps (Redis 7 sends a
    /// script's effects, and `SET ... PX` as `PXAT`).
    pub(super) effects: Vec<Vec<Vec<u8>>>,
}

/// A command's spec: arity (Redis's: negative is a minimum) and whether it writes.
pub(super) fn spec(name: &str) -> Option<(i64, bool)> {
    Some(match name {
        "get" | "pttl" | "ttl" => (2, false),
        "incr" => (2, true),
        "set" => (-3, true),
        "del" => (-2, true),
        "exists" => (-2, false),
        "pexpire" | "pexpireat" => (-3, true),
        "ping" => (-1, false),
        _ => return None,
    })
}

impl Keyspace {
    /// An empty keyspace in `role`.
    #[must_use]
    pub fn new(role: Role) -> Self {
        Self { keys: BTreeMap::new(), role, effects: Vec::new() }
    }

    /// Runs one data command (`name` lowercase, `args` after the name) at `now_ms`. The caller
    /// has checked the arity and, on a replica, that it does not write.
    pub(super) fn exec(&mut self, name: &str, args: &[Vec<u8>], now_ms: u64) -> Reply {
        match name {
            "get" => self.live(&args[0], now_ms).map_or(Reply::Nil, |e| Reply::Bulk(e.value.clone())),
            "set" => self.set(args, now_ms),
            "del" => Reply::Int(args.iter().filter(|k| self.delete(k, now_ms)).count() as i64),
            "exists" => Reply::Int(args.iter().filter(|k| self.live(k, now_ms).is_some()).count() as i64),
            "incr" => self.incr(&args[0], now_ms),
            "pexpire" => self.expire(args, now_ms, false),
            "pexpireat" => self.expire(args, now_ms, true),
            "pttl" | "ttl" => self.ttl(&args[0], now_ms, name == "ttl"),
            "ping" => match args {
                [] => Reply::Status("PONG".into()),
                [msg] => Reply::Bulk(msg.clone()),
                _ => Reply::err("wrong number of arguments for 'ping' command"),
            },
            _ => Reply::err(&format!("unknown command '{name}'")),
        }
    }

    /// Applies an effect from the primary's stream (a replica), ignoring its reply.
    pub(super) fn apply(&mut self, effect: &[Vec<u8>], now_ms: u64) {
        let Some((name, args)) = effect.split_first() else { return };
        let name = String::from_utf8_lossy(name).to_ascii_lowercase();
        let _ = self.exec(&name, args, now_ms);
        self.effects.clear();
    }

    /// The key if it exists and has not expired. A primary deletes an expired key it meets (and
    /// replicates the deletion); a replica only hides it.
    fn live(&mut self, key: &[u8], now_ms: u64) -> Option<&Entry> {
        let expired = self.keys.get(key)?.expires_at_ms.is_some_and(|at| at <= now_ms);
        if expired {
            if self.role == Role::Primary {
                self.keys.remove(key);
                self.effects.push(vec![b"DEL".to_vec(), key.to_vec()]);
            }
            return None;
        }
        self.keys.get(key)
    }

    fn delete(&mut self, key: &[u8], now_ms: u64) -> bool {
        if self.live(key, now_ms).is_none() {
            return false;
        }
        self.keys.remove(key);
        self.effects.push(vec![b"DEL".to_vec(), key.to_vec()]);
        true
    }

    /// `SET key value [NX|XX] [GET] [EX s|PX ms|EXAT s|PXAT ms|KEEPTTL]`.
    fn set(&mut self, args: &[Vec<u8>], now_ms: u64) -> Reply {
        let (key, value) = (&args[0], &args[1]);
        let opts = match SetOptions::parse(&args[2..], now_ms) {
            Ok(o) => o,
            Err(reply) => return reply,
        };
        let old = self.live(key, now_ms).cloned();
        let old_reply = old.as_ref().map_or(Reply::Nil, |e| Reply::Bulk(e.value.clone()));
        if (opts.nx && old.is_some()) || (opts.xx && old.is_none()) {
            return if opts.get { old_reply } else { Reply::Nil };
        }
        let expires_at_ms = match opts.expires_at_ms {
            Some(at) => Some(at),
            None if opts.keep_ttl => old.and_then(|e| e.expires_at_ms),
            None => None,
        };
        self.keys.insert(key.clone(), Entry { value: value.clone(), expires_at_ms });
        let mut effect = vec![b"SET".to_vec(), key.clone(), value.clone()];
        if let Some(at) = expires_at_ms {
            effect.extend([b"PXAT".to_vec(), at.to_string().into_bytes()]);
        }
        self.effects.push(effect);
        if opts.get {
            old_reply
        } else {
            Reply::ok()
        }
    }

    fn incr(&mut self, key: &[u8], now_ms: u64) -> Reply {
        let (current, expires_at_ms) = match self.live(key, now_ms) {
            None => (0, None),
            Some(e) => match parse_i64(&e.value) {
                Some(n) => (n, e.expires_at_ms),
                None => return Reply::err("value is not an integer or out of range"),
            },
        };
        let Some(next) = current.checked_add(1) else {
            return Reply::err("increment or decrement would overflow");
        };
        self.keys.insert(key.to_vec(), Entry { value: next.to_string().into_bytes(), expires_at_ms });
        self.effects.push(vec![b"INCR".to_vec(), key.to_vec()]);
        Reply::Int(next)
    }

    /// `PEXPIRE key ms` / `PEXPIREAT key ms-stamp` (no NX/XX/GT/LT: the lease does not use them).
    fn expire(&mut self, args: &[Vec<u8>], now_ms: u64, absolute: bool) -> Reply {
        let name = if absolute { "pexpireat" } else { "pexpire" };
        if args.len() > 2 {
            return Reply::err(&format!("Unsupported option {}", String::from_utf8_lossy(&args[2])));
        }
        let Some(n) = parse_i64(&args[1]) else { return Reply::err("value is not an integer or out of range") };
        let at = if absolute { Some(n) } else { i64::try_from(now_ms).ok().and_then(|now| now.checked_add(n)) };
        let Some(at) = at else { return Reply::err(&format!("invalid expire time in '{name}' command")) };
        if self.live(&args[0], now_ms).is_none() {
            return Reply::Int(0);
        }
        if at <= i64::try_from(now_ms).unwrap_or(i64::MAX) {
            // An expiry in the past deletes the key at once.
            self.keys.remove(&args[0]);
            self.effects.push(vec![b"DEL".to_vec(), args[0].clone()]);
            return Reply::Int(1);
        }
        let at = u64::try_from(at).unwrap_or(u64::MAX);
        if let Some(e) = self.keys.get_mut(&args[0]) {
            e.expires_at_ms = Some(at);
        }
        self.effects.push(vec![b"PEXPIREAT".to_vec(), args[0].clone(), at.to_string().into_bytes()]);
        Reply::Int(1)
    }

    fn ttl(&mut self, key: &[u8], now_ms: u64, seconds: bool) -> Reply {
        match self.live(key, now_ms) {
            None => Reply::Int(-2),
            Some(Entry { expires_at_ms: None, .. }) => Reply::Int(-1),
            Some(Entry { expires_at_ms: Some(at), .. }) => {
                let left = at.saturating_sub(now_ms);
                let left = if seconds { left.saturating_add(500) / 1000 } else { left };
                Reply::Int(i64::try_from(left).unwrap_or(i64::MAX))
            }
        }
    }

    /// Forgets everything (a restart without persistence).
    pub(super) fn clear(&mut self) {
        self.keys.clear();
        self.effects.clear();
    }
}

/// SET's options.
#[derive(Default)]
struct SetOptions {
    nx: bool,
    xx: bool,
    get: bool,
    keep_ttl: bool,
    expires_at_ms: Option<u64>,
}

impl SetOptions {
    /// As Redis does: the whole syntax first, then the expiry's number.
    fn parse(opts: &[Vec<u8>], now_ms: u64) -> Result<Self, Reply> {
        let syntax = || Reply::err("syntax error");
        let mut o = Self::default();
        let mut expiry: Option<(String, &[u8])> = None;
        let mut i = 0;
        while i < opts.len() {
            let word = String::from_utf8_lossy(&opts[i]).to_ascii_uppercase();
            match word.as_str() {
                "NX" if !o.xx => o.nx = true,
                "XX" if !o.nx => o.xx = true,
                "GET" => o.get = true,
                "KEEPTTL" if expiry.is_none() => o.keep_ttl = true,
                "EX" | "PX" | "EXAT" | "PXAT" if expiry.is_none() && !o.keep_ttl && i + 1 < opts.len() => {
                    expiry = Some((word, &opts[i + 1]));
                    i += 1;
                }
                _ => return Err(syntax()),
            }
            i += 1;
        }
        if let Some((unit, n)) = expiry {
            let n = parse_i64(n).ok_or_else(|| Reply::err("value is not an integer or out of range"))?;
            o.expires_at_ms = Some(absolute(&unit, n, now_ms)?);
        }
        Ok(o)
    }
}

/// An expiry option's absolute stamp, ms.
fn absolute(unit: &str, n: i64, now_ms: u64) -> Result<u64, Reply> {
    let invalid = || Reply::err("invalid expire time in 'set' command");
    if n <= 0 {
        return Err(invalid());
    }
    let n = u64::try_from(n).map_err(|_| invalid())?;
    let at = match unit {
        "EX" => n.checked_mul(1000).and_then(|ms| ms.checked_add(now_ms)),
        "PX" => n.checked_add(now_ms),
        "EXAT" => n.checked_mul(1000),
        _ => Some(n),
    };
    at.filter(|at| i64::try_from(*at).is_ok()).ok_or_else(invalid)
}

/// A Redis integer argument: optional minus, digits, no spaces or plus sign, within i64.
pub(super) fn parse_i64(b: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(b).ok()?;
    if s.is_empty() || s.starts_with('+') || s.len() > 20 || (s.len() > 1 && s.starts_with('0')) || s == "-0" {
        return None;
    }
    if s.starts_with("-0") {
        return None;
    }
    s.parse().ok()
}
