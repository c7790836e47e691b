//! Toxics: what each one is, how it is parsed and shown (Toxiproxy 2.12's JSON), and what it does
//! to one chunk of one direction of one connection. The pumping itself is in `link`.

use std::time::Duration;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::error::ApiError;

/// Which way the data flows: `upstream` is client to server, `downstream` server to client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Stream {
    /// Client to upstream server.
    Upstream,
    /// Upstream server to client.
    Downstream,
}

impl Stream {
    fn parse(s: &str) -> Result<Self, ApiError> {
        match s {
            "upstream" => Ok(Stream::Upstream),
            "downstream" => Ok(Stream::Downstream),
            _ => Err(ApiError::InvalidStream),
        }
    }
    /// The name used in JSON and default toxic names.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Stream::Upstream => "upstream",
            Stream::Downstream => "downstream",
        }
    }
}

/// A toxic's effect with its attributes (all integers, as in Toxiproxy).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Delay every chunk by `latency` ms, plus or minus up to `jitter` ms.
    Latency { latency: u64, jitter: u64 },
    /// Limit throughput to `rate` KB/s.
    Bandwidth { rate: u64 },
    /// Delay the close after the source closes by `delay` ms.
    SlowClose { delay: u64 },
    /// Drop all data; close after `timeout` ms (0: hold the connection forever).
    Timeout { timeout: u64 },
    /// Reset the connection (TCP RST) after `timeout` ms (0: at once).
    ResetPeer { timeout: u64 },
    /// Cut chunks into slices of `average_size` +- `size_variation` bytes, `delay` µs apart.
    Slicer { average_size: u64, size_variation: u64, delay: u64 },
    /// Close the connection after `bytes` bytes in this direction.
    LimitData { bytes: u64 },
    /// Does nothing.
    Noop,
    /// An extension of this server's (Toxiproxy has no such toxic): holds the client's commands
    /// aimed at (`Toxic::aim`: a key's renewals) and everything after them on their connection,
    /// until the toxic is removed; then they go on, in order. Upstream only.
    Hold,
    /// An extension of this server's: the reply to the first command aimed at (`Toxic::aim`: a
    /// key's acquires, renewals or releases) that a client of this proxy sends once the toxic is
    /// in place is dropped, and that connection closed; the command itself reaches the server and
    /// runs. Once per toxic: later commands pass. Downstream only (it acts on a reply).
    LoseReply,
}

/// What an aimed toxic acts on: the Redis commands that do `command` to the lease `key` (by the
/// witness's reading of what a command does to a lease).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Aim {
    /// The lease key.
    pub key: String,
    /// Which of its commands.
    pub command: AimedCommand,
}

/// A lease command an aimed toxic acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AimedCommand {
    /// An acquire (`SET NX`, or a script that sets the key to a token not yet holding it).
    Acquire,
    /// A renewal (`PEXPIRE`, `SET XX`, a script extending it, a set of the key to the token that
    /// holds it).
    Renew,
    /// A release (`DEL`, a compare-and-delete script).
    Release,
    /// Any command on the key (checks included).
    Lease,
}

impl AimedCommand {
    fn parse(s: &str) -> Option<Self> {
        match s {
            "acquire" => Some(Self::Acquire),
            "renew" => Some(Self::Renew),
            "release" => Some(Self::Release),
            "lease" => Some(Self::Lease),
            _ => None,
        }
    }

    /// Its name in the API.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Acquire => "acquire",
            Self::Renew => "renew",
            Self::Release => "release",
            Self::Lease => "lease",
        }
    }
}

/// The largest value of each attribute: an hour for times in ms, a minute for the slicer's µs,
/// 1 MiB for slice sizes, 10 GB/s for a bandwidth, 2^53 bytes for a data limit. Beyond these a
/// toxic is no fault but a hang or an overflow.
#[must_use]
pub fn attribute_max(kind: &str, name: &str) -> u64 {
    match (kind, name) {
        ("slicer", "delay") => 60_000_000,
        ("slicer", _) => 1 << 20,
        ("bandwidth", _) => 10_000_000,
        ("limit_data", _) => 1 << 53,
        _ => 3_600_000,
    }
}

/// Whether `name` can name a proxy or a toxic: 1 to 128 of letters, digits, `.`, `_`, `-`, so
/// that it is one path segment of the API, needing no escaping.
#[must_use]
pub fn addressable(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

const TYPES: [&str; 10] = [
    "latency",
    "bandwidth",
    "slow_close",
    "timeout",
    "reset_peer",
    "slicer",
    "limit_data",
    "noop",
    "hold",
    "lose_reply",
];

impl Effect {
    fn type_name(self) -> &'static str {
        match self {
            Effect::Latency { .. } => "latency",
            Effect::Bandwidth { .. } => "bandwidth",
            Effect::SlowClose { .. } => "slow_close",
            Effect::Timeout { .. } => "timeout",
            Effect::ResetPeer { .. } => "reset_peer",
            Effect::Slicer { .. } => "slicer",
            Effect::LimitData { .. } => "limit_data",
            Effect::Noop => "noop",
            Effect::Hold => "hold",
            Effect::LoseReply => "lose_reply",
        }
    }

    /// Builds the effect of `kind` from JSON attributes; missing attributes are 0. Each is a
    /// whole number within [`attribute_max`] (a float with no fraction counts as one).
    fn from_attributes(kind: &str, attrs: &Map<String, Value>) -> Result<Self, ApiError> {
        let get = |name: &str| -> Result<u64, ApiError> {
            let max = attribute_max(kind, name);
            let whole = |v: &Value| {
                v.as_u64().or_else(|| {
                    let f = v.as_f64()?;
                    // Below 2^53 every whole f64 is exact: the cast cannot round.
                    (f >= 0.0 && f.fract() == 0.0 && f <= max as f64).then_some(f as u64)
                })
            };
            match attrs.get(name) {
                None | Some(Value::Null) => Ok(0),
                Some(v) => whole(v).filter(|n| *n <= max).ok_or_else(|| {
                    ApiError::BadRequestBody(format!(
                        "attribute `{name}` of {kind} must be a whole number from 0 to {max}, got {v}"
                    ))
                }),
            }
        };
        Ok(match kind {
            "latency" => Effect::Latency { latency: get("latency")?, jitter: get("jitter")? },
            "bandwidth" => Effect::Bandwidth { rate: get("rate")? },
            "slow_close" => Effect::SlowClose { delay: get("delay")? },
            "timeout" => Effect::Timeout { timeout: get("timeout")? },
            "reset_peer" => Effect::ResetPeer { timeout: get("timeout")? },
            "slicer" => Effect::Slicer {
                average_size: get("average_size")?,
                size_variation: get("size_variation")?,
                delay: get("delay")?,
            },
            "limit_data" => Effect::LimitData { bytes: get("bytes")? },
            "noop" => Effect::Noop,
            "hold" => Effect::Hold,
            "lose_reply" => Effect::LoseReply,
            _ => return Err(ApiError::InvalidToxicType),
        })
    }

    fn attributes(self) -> Map<String, Value> {
        let pairs: Vec<(&str, u64)> = match self {
            Effect::Latency { latency, jitter } => vec![("latency", latency), ("jitter", jitter)],
            Effect::Bandwidth { rate } => vec![("rate", rate)],
            Effect::SlowClose { delay } => vec![("delay", delay)],
            Effect::Timeout { timeout } | Effect::ResetPeer { timeout } => vec![("timeout", timeout)],
            Effect::Slicer { average_size, size_variation, delay } => {
                vec![("average_size", average_size), ("size_variation", size_variation), ("delay", delay)]
            }
            Effect::LimitData { bytes } => vec![("bytes", bytes)],
            Effect::Noop | Effect::Hold | Effect::LoseReply => vec![],
        };
        pairs.into_iter().map(|(k, v)| (k.to_owned(), Value::from(v))).collect()
    }
}

/// One toxic on one proxy.
#[derive(Debug, Clone, PartialEq)]
pub struct Toxic {
    /// Unique per proxy; defaults to `<type>_<stream>`.
    pub name: String,
    /// Which direction it acts on.
    pub stream: Stream,
    /// Probability (0..=1) that it applies to a connection, rolled once per connection.
    pub toxicity: f32,
    /// What it does.
    pub effect: Effect,
    /// The commands it acts on (`hold`, `lose_reply`), if it is aimed.
    pub aim: Option<Aim>,
    /// Whether a `lose_reply` has lost its one reply (shared by its copies; a toxic added anew
    /// has a fresh one).
    pub fired: Fired,
}

/// A once-only mark shared by a toxic's copies. Every two compare equal: it is state, not what
/// the toxic is.
#[derive(Debug, Clone, Default)]
pub struct Fired(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl Fired {
    /// Sets the mark; whether this call was the one that set it.
    pub fn fire(&self) -> bool {
        !self.0.swap(true, std::sync::atomic::Ordering::AcqRel)
    }
}

impl PartialEq for Fired {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Toxic {
    /// Parses a `POST /proxies/{proxy}/toxics` body.
    pub fn from_json(body: &[u8]) -> Result<Self, ApiError> {
        let obj = parse_object(body)?;
        let kind = obj.get("type").and_then(Value::as_str).unwrap_or("");
        if !TYPES.contains(&kind) {
            return Err(ApiError::InvalidToxicType);
        }
        let stream = match obj.get("stream") {
            None | Some(Value::Null) => Stream::Downstream,
            Some(Value::String(s)) if s.is_empty() => Stream::Downstream,
            Some(Value::String(s)) => Stream::parse(s)?,
            Some(_) => return Err(ApiError::InvalidStream),
        };
        let toxicity = toxicity(&obj)?.unwrap_or(1.0);
        let empty = Map::new();
        let attrs = match obj.get("attributes") {
            Some(Value::Object(m)) => m,
            None | Some(Value::Null) => &empty,
            Some(_) => return Err(ApiError::BadRequestBody("`attributes` must be an object".into())),
        };
        let effect = Effect::from_attributes(kind, attrs)?;
        let aim = aim(kind, attrs)?;
        if effect == Effect::Hold && stream != Stream::Upstream {
            return Err(ApiError::BadRequestBody(
                "a hold acts on the client's commands: its stream is upstream".into(),
            ));
        }
        if effect == Effect::LoseReply && stream != Stream::Downstream {
            return Err(ApiError::BadRequestBody("a lose_reply acts on a reply: its stream is downstream".into()));
        }
        if matches!(effect, Effect::Latency { .. }) && aim.is_some() && stream != Stream::Upstream {
            return Err(ApiError::BadRequestBody(
                "a latency aimed at a key's commands delays their requests: its stream is upstream".into(),
            ));
        }
        let name = match obj.get("name").and_then(Value::as_str) {
            Some(n) if !n.is_empty() => n.to_owned(),
            _ => format!("{kind}_{}", stream.as_str()),
        };
        if !addressable(&name) {
            return Err(ApiError::BadRequestBody(format!(
                "toxic name {name:?} must be 1 to 128 of letters, digits, '.', '_' and '-' (it is a path segment)"
            )));
        }
        Ok(Self { name, stream, toxicity, effect, aim, fired: Fired::default() })
    }

    /// Applies a `PATCH /proxies/{proxy}/toxics/{toxic}` body: toxicity and attributes; the
    /// attributes not given keep their values.
    pub fn update_from_json(&self, body: &[u8]) -> Result<Self, ApiError> {
        let obj = parse_object(body)?;
        let mut next = self.clone();
        if let Some(t) = toxicity(&obj)? {
            next.toxicity = t;
        }
        if let Some(Value::Object(given)) = obj.get("attributes") {
            let mut attrs = self.effect.attributes();
            if let Some(a) = &self.aim {
                a.show(&mut attrs, self.effect);
            }
            attrs.extend(given.clone());
            next.effect = Effect::from_attributes(self.effect.type_name(), &attrs)?;
            next.aim = aim(self.effect.type_name(), &attrs)?;
        }
        Ok(next)
    }

    /// The JSON Toxiproxy shows for this toxic.
    #[must_use]
    pub fn to_json(&self) -> Value {
        let mut attributes = self.effect.attributes();
        if let Some(a) = &self.aim {
            a.show(&mut attributes, self.effect);
        }
        serde_json::json!({
            "name": self.name,
            "type": self.effect.type_name(),
            "stream": self.stream.as_str(),
            "toxicity": self.toxicity,
            "attributes": Value::Object(attributes),
        })
    }
}

impl Aim {
    /// Its attributes, as the API shows them (a hold's command is always `renew`: not shown).
    fn show(&self, attrs: &mut Map<String, Value>, effect: Effect) {
        attrs.insert("key".into(), Value::from(self.key.clone()));
        if effect != Effect::Hold {
            attrs.insert("command".into(), Value::from(self.command.as_str()));
        }
    }
}

/// The aim of a `hold` (its `key` attribute, a string of 1 to 512 bytes: the key's renewals), of
/// a `lose_reply` (`key` and `command`: `acquire`, `renew`, `release` or `lease`, any of them), or
/// of a `latency` given a `key` (an extension: only the requests of those commands are delayed).
fn aim(kind: &str, attrs: &Map<String, Value>) -> Result<Option<Aim>, ApiError> {
    let aimed_latency = kind == "latency" && attrs.get("key").is_some_and(|k| !k.is_null());
    if kind != "hold" && kind != "lose_reply" && !aimed_latency {
        return Ok(None);
    }
    let key = match attrs.get("key") {
        Some(Value::String(k)) if (1..=512).contains(&k.len()) => k.clone(),
        other => {
            return Err(ApiError::BadRequestBody(format!(
                "attribute `key` of {kind} must be the lease key (a string of 1 to 512 bytes), got {}",
                other.map_or("nothing".into(), Value::to_string)
            )))
        }
    };
    let command = match (kind, attrs.get("command")) {
        ("hold", None | Some(Value::Null)) => AimedCommand::Renew,
        ("hold", Some(v)) => {
            return Err(ApiError::BadRequestBody(format!(
                "a hold is aimed at renewals: it takes no `command`, got {v}"
            )))
        }
        (_, c) => c.and_then(Value::as_str).and_then(AimedCommand::parse).ok_or_else(|| {
            ApiError::BadRequestBody(format!(
                "attribute `command` of {kind} must be \"acquire\", \"renew\", \"release\" or \"lease\", got {}",
                c.map_or("nothing".into(), Value::to_string)
            ))
        })?,
    };
    Ok(Some(Aim { key, command }))
}

fn parse_object(body: &[u8]) -> Result<Map<String, Value>, ApiError> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(ApiError::BadRequestBody("expected a JSON object".into())),
        Err(e) => Err(ApiError::BadRequestBody(e.to_string())),
    }
}

fn toxicity(obj: &Map<String, Value>) -> Result<Option<f32>, ApiError> {
    match obj.get("toxicity") {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_f64() {
            Some(t) if (0.0..=1.0).contains(&t) => Ok(Some(t as f32)),
            _ => Err(ApiError::BadRequestBody(format!("toxicity must be a number from 0 to 1, got {v}"))),
        },
    }
}

/// Milliseconds as a `Duration`.
#[must_use]
pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[cfg(test)]
mod tests;
