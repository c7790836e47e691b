//! The environment watcher: what changed around the nodes while a run ran, as history lines
//! ([`EnvEvent`]). Three watchers, each on its own path:
//! - Docker's event stream: a container of the environment died, started, froze or ran out of
//!   memory, stamped with Docker's own time;
//! - each Sentinel's announcements (`+sdown`, `+odown`, `+switch-master`, `+tilt`, ...), from a
//!   `redis-cli psubscribe` inside it, stamped on receipt;
//! - the proxy server's list: a node's proxy gone or disabled, or the API silent three polls in a
//!   row;
//! - the host's wall clock: a step of it (Redis expires keys on the wall clock, the nodes' leases
//!   count on the monotonic one; a step moves every key's expiry against its holder's deadline).
//!
//! The watcher records; the checker decides which changes no declared fault explains (drift).

use std::collections::HashMap;
use std::time::Duration;

use futures_util::StreamExt;
use leasequake_reports::history::{EnvChange, EnvEvent, HistoryLine};
use leasequake_toxiproxy::Client as ProxyClient;
use testcontainers::bollard::query_parameters::EventsOptions;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use crate::clock::mono_ns;
use crate::env::Environment;

/// Where the watcher's lines go (the run's history).
pub type Push<'a> = &'a (dyn Fn(HistoryLine) + Sync);

/// At most this many lines per watcher and run: a flapping environment cannot flood the history.
const LINES_MAX: usize = 1000;
/// A watcher whose stream ends (Docker's event stream has a client timeout) starts again, at most
/// this many times per run.
const RESTARTS_MAX: u32 = 50;
/// How often the proxy server's list is read.
const PROXY_POLL: Duration = Duration::from_secs(1);
/// Polls in a row the proxy API may miss before it is recorded as unreachable: one slow answer on
/// a loaded machine is not a stopped proxy (each poll waits 5 s).
const PROXY_MISSES: u32 = 3;
/// The Docker events that change a container's state.
const CONTAINER_EVENTS: [&str; 5] = ["die", "start", "pause", "unpause", "oom"];

/// Watches the environment until `stop`, pushing what changed. `nodes` is how many nodes have
/// proxies (`n1-redis`, `n1-store`, ...).
pub async fn watch(env: &Environment, nodes: u32, push: Push<'_>, stop: &CancellationToken) {
    let sentinels = ["sentinel-1", "sentinel-2", "sentinel-3"].map(|s| announcements(env, s, push, stop));
    let [s1, s2, s3] = sentinels;
    tokio::join!(containers(env, push, stop), proxies(env, nodes, push, stop), host_clock(push, stop), s1, s2, s3);
}

/// How often the host's wall clock is compared with its monotonic clock.
const CLOCK_POLL: Duration = Duration::from_millis(100);
/// A step of the wall clock against the monotonic one of at least this is recorded (NTP slews
/// by far less than a ms per poll; a step is the clock set).
pub const CLOCK_STEP_MS: i64 = 10;

/// The wall clock less the monotonic clock, ns, read so that the two readings are at most 1 ms
/// apart (a preemption between them would look like a step); `None` if no such reading came.
fn wall_less_mono() -> Option<i128> {
    for _ in 0..5 {
        let m1 = mono_ns();
        let w = wall_ns();
        let m2 = mono_ns();
        if m2.saturating_sub(m1) <= 1_000_000 {
            return Some(i128::from(w) - i128::from(m1 / 2 + m2 / 2));
        }
    }
    None
}

/// Steps of the host's wall clock, each an environment line.
async fn host_clock(push: Push<'_>, stop: &CancellationToken) {
    let mut last = wall_less_mono();
    let mut pushed = 0usize;
    // Bounded by `stop` and by LINES_MAX.
    while pushed < LINES_MAX {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(CLOCK_POLL) => {}
        }
        let Some(now) = wall_less_mono() else { continue };
        if let Some(step_ms) = last.map(|l| (now - l) / 1_000_000).filter(|s| s.abs() >= i128::from(CLOCK_STEP_MS)) {
            let detail = format!(
                "the host's wall clock stepped {step_ms:+} ms against its monotonic clock (Redis expires keys on it)"
            );
            push(event(EnvChange::ClockStepped, "host", "host-clock", mono_ns(), detail));
            pushed += 1;
        }
        last = Some(now);
    }
}

fn event(change: EnvChange, subject: &str, source: &str, at_ns: u64, detail: String) -> HistoryLine {
    HistoryLine::Environment(EnvEvent {
        change,
        subject: subject.to_owned(),
        source: source.to_owned(),
        at_ns,
        detail: leasequake_reports::printable(&detail).chars().take(200).collect(),
    })
}

fn wall_ns() -> u64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    u64::try_from(now.as_nanos()).unwrap_or(u64::MAX)
}

/// Docker's events for the environment's containers. Their times are Docker's (wall clock, ns),
/// moved onto the history's CLOCK_MONOTONIC by one offset read at the start, never after the
/// moment of receipt and never backwards; events from before the watcher began are skipped.
async fn containers(env: &Environment, push: Push<'_>, stop: &CancellationToken) {
    let roles: HashMap<String, &'static str> = env.containers().map(|(r, id)| (id.to_owned(), r)).collect();
    let filters = HashMap::from([
        ("type".to_owned(), vec!["container".to_owned()]),
        ("container".to_owned(), roles.keys().cloned().collect()),
        ("event".to_owned(), CONTAINER_EVENTS.map(str::to_owned).to_vec()),
    ]);
    let (wall0, mono0) = (wall_ns(), mono_ns());
    let (mut last_wall, mut last_at, mut seen) = (wall0, mono0, 0usize);
    for _ in 0..RESTARTS_MAX {
        let since = format!("{}.{:09}", last_wall / 1_000_000_000, last_wall % 1_000_000_000);
        let opts = EventsOptions { since: Some(since), until: None, filters: Some(filters.clone()) };
        let mut stream = env.docker().events(Some(opts));
        // Bounded by `stop`, by the stream's end and by LINES_MAX.
        while seen < LINES_MAX {
            let next = tokio::select! {
                () = stop.cancelled() => return,
                n = stream.next() => n,
            };
            let Some(Ok(m)) = next else { break };
            let Some(wall) = m.time_nano.and_then(|t| u64::try_from(t).ok()) else { continue };
            let role = m.actor.as_ref().and_then(|a| a.id.as_ref()).and_then(|id| roles.get(id));
            let (Some(role), Some(action)) = (role, m.action.as_deref()) else { continue };
            if wall < wall0 || (seen > 0 && wall <= last_wall) {
                continue; // seen before a restart of the stream, or from before the run
            }
            last_wall = wall;
            let at = mono0.saturating_add(wall - wall0).clamp(last_at, mono_ns().max(last_at));
            last_at = at;
            let code = m.actor.as_ref().and_then(|a| a.attributes.as_ref()).and_then(|a| a.get("exitCode"));
            let (change, detail) = match (action, code) {
                ("die", Some(c)) => (EnvChange::ContainerDied, format!("the container stopped (exit code {c})")),
                ("die", None) => (EnvChange::ContainerDied, "the container stopped".to_owned()),
                ("start", _) => (EnvChange::ContainerStarted, "the container started".to_owned()),
                (other, _) => (EnvChange::ContainerOther, format!("Docker event `{other}`")),
            };
            push(event(change, role, "docker", at, detail));
            seen += 1;
        }
        if stop.is_cancelled() || seen >= LINES_MAX {
            return;
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(Duration::from_millis(200)) => {}
        }
    }
    warn!("Docker's event stream ended {RESTARTS_MAX} times; containers are no longer watched");
}

/// One Sentinel's own announcements, through `redis-cli psubscribe '*'` inside it.
async fn announcements(env: &Environment, sentinel: &'static str, push: Push<'_>, stop: &CancellationToken) {
    let cmd = ["redis-cli", "-p", "26379", "--csv", "psubscribe", "*"];
    for _ in 0..RESTARTS_MAX {
        let heard = env.follow(sentinel, &cmd, stop, LINES_MAX, |line| {
            if let Some((change, subject, detail)) = announcement(line) {
                let subject = if subject.is_empty() { sentinel } else { &subject };
                push(event(change, subject, sentinel, mono_ns(), detail));
            }
        });
        if let Err(e) = heard.await {
            warn!(%sentinel, error = %e, "cannot follow the Sentinel's announcements");
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
    }
}

/// A Sentinel's announcement as `redis-cli --csv` prints it
/// (`"pmessage","*","+sdown","master leasequake redis-primary 6379"`): what changed, about which
/// instance, and the announcement itself. Anything else (the subscription's own reply) is `None`.
#[must_use]
pub fn announcement(line: &str) -> Option<(EnvChange, String, String)> {
    let rest = line.strip_prefix("\"pmessage\",\"*\",\"")?.strip_suffix('"')?;
    let (name, message) = rest.split_once("\",\"")?;
    let words: Vec<&str> = message.split_whitespace().collect();
    // +switch-master <master> <old-ip> <old-port> <new-ip> <new-port>: about the new master;
    // <type> <name> <ip> <port> ...: about the instance at <ip>; the rest (`+tilt`): about the
    // Sentinel itself (an empty subject, which the caller names).
    let (change, subject) = match (name, words.first().copied()) {
        ("+switch-master", _) => (EnvChange::SwitchMaster, words.get(3)),
        (_, Some("master" | "slave" | "sentinel")) => (EnvChange::Sentinel, words.get(2)),
        _ => (EnvChange::Sentinel, None),
    };
    Some((change, subject.copied().unwrap_or("").to_owned(), format!("{name} {message}")))
}

/// The proxy server's list, every second: each node's two proxies present and enabled, and the API
/// answering. Records changes of state only.
async fn proxies(env: &Environment, nodes: u32, push: Push<'_>, stop: &CancellationToken) {
    let api = ProxyClient::new(env.proxy_api.clone());
    let names: Vec<String> = (1..=nodes).flat_map(|i| [format!("n{i}-redis"), format!("n{i}-store")]).collect();
    let mut state: HashMap<&str, &str> = names.iter().map(|n| (n.as_str(), "enabled")).collect();
    let (mut misses, mut seen) = (0u32, 0usize);
    // Bounded by `stop` and by LINES_MAX.
    while !stop.is_cancelled() && seen < LINES_MAX {
        match api.proxies().await {
            Ok(list) => {
                misses = 0;
                for n in &names {
                    let now = match list.get(n) {
                        None => "missing",
                        Some(p) if !p.enabled => "disabled",
                        Some(_) => "enabled",
                    };
                    if state.insert(n, now) != Some(now) {
                        let detail = format!("the proxy is {now} on the proxy server");
                        push(event(EnvChange::ProxyChanged, n, "proxy-api", mono_ns(), detail));
                        seen += 1;
                    }
                }
            }
            Err(e) => {
                misses += 1;
                if misses == PROXY_MISSES {
                    let detail = format!("the proxy API missed {PROXY_MISSES} polls in a row: {e}");
                    push(event(EnvChange::ProxyUnreachable, "proxy", "proxy-api", mono_ns(), detail));
                    seen += 1;
                }
            }
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(PROXY_POLL) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sentinels_announcements_are_read_and_its_other_lines_are_not() {
        let (change, subject, detail) =
            announcement(r#""pmessage","*","+switch-master","leasequake redis-primary 6379 redis-replica 6379""#)
                .unwrap();
        assert_eq!((change, subject.as_str()), (EnvChange::SwitchMaster, "redis-replica"));
        assert_eq!(detail, "+switch-master leasequake redis-primary 6379 redis-replica 6379");
        let (change, subject, _) =
            announcement(r#""pmessage","*","+sdown","master leasequake redis-primary 6379""#).unwrap();
        assert_eq!((change, subject.as_str()), (EnvChange::Sentinel, "redis-primary"));
        let (_, subject, _) = announcement(r##""pmessage","*","+tilt","#tilt mode entered""##).unwrap();
        assert_eq!(subject, "");
        for other in ["Reading messages... (press Ctrl-C to quit)", r#""psubscribe","*",1"#, "", r#""pmessage","*""#] {
            assert_eq!(announcement(other), None, "{other}");
        }
    }
}
