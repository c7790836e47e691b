//! A scenario written back as a file: a schedule's faults as `[[faults]]` tables (every field a
//! scenario file may hold, times to the ms) and the text assembled with what the scenario is
//! first, parsed back before anyone writes it. The simulation's export and the container lane's
//! shrink both write their results with it.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use super::{Aimed, Direction, Fault, FaultKind, Link, Mode};

/// One `[[faults]]` table.
#[derive(Serialize)]
struct FileFault {
    kind: FaultKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    target: Option<String>,
    at_s: u64,
    duration_s: u64,
    /// Not for a triggered fault: it begins at its event (`at_s` arms it).
    #[serde(skip_serializing_if = "Option::is_none")]
    at_ms: Option<u64>,
    duration_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    on: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    link: Option<Link>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mode: Option<Mode>,
    #[serde(skip_serializing_if = "Option::is_none")]
    latency_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    jitter_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    direction: Option<Direction>,
    #[serde(skip_serializing_if = "Option::is_none")]
    command: Option<Aimed>,
    #[serde(skip_serializing_if = "Option::is_none")]
    jump_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    follow_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    never_follow: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    follow_ms_by_node: Option<BTreeMap<String, u64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    unreplicated_acquire: Option<bool>,
}

impl FileFault {
    fn of(f: &Fault) -> Self {
        let (at_ms, duration_ms) = (f.at_ms(), f.duration_ms());
        Self {
            kind: f.kind,
            target: f.target.clone(),
            at_s: at_ms / 1000,
            duration_s: duration_ms.div_ceil(1000),
            at_ms: f.on.is_none().then_some(at_ms),
            duration_ms,
            on: f.on.clone(),
            link: f.link,
            mode: f.mode,
            latency_ms: f.latency_ms,
            jitter_ms: f.jitter_ms,
            direction: f.direction,
            command: f.command,
            jump_ms: f.jump_ms,
            follow_ms: f.follow_ms,
            never_follow: f.never_follow.clone(),
            follow_ms_by_node: f.follow_ms_by_node.clone(),
            unreplicated_acquire: f.unreplicated_acquire,
        }
    }
}

/// `faults` as the `faults` array of a scenario file, in the order they begin.
///
/// # Errors
/// A fault cannot be written as TOML (a defect: the message names it).
pub fn faults_value(faults: &[Fault]) -> Result<toml::Value, String> {
    let mut faults: Vec<FileFault> = faults.iter().map(FileFault::of).collect();
    faults.sort_by_key(|f| (f.at_s, f.at_ms));
    let faults: Vec<toml::Value> =
        faults.into_iter().map(toml::Value::try_from).collect::<Result<_, _>>().map_err(|e| e.to_string())?;
    Ok(toml::Value::Array(faults))
}

/// The keys that say what a scenario is, written first.
const HEAD: [&str; 5] = ["name", "description", "incident", "seed", "duration_s"];

/// The file's text for `table`: what the scenario is first, then its configuration and faults;
/// checked by parsing it back as a scenario.
///
/// # Errors
/// The table does not make a valid scenario (the message says why).
pub fn text(mut table: toml::Table) -> Result<String, String> {
    let mut head = toml::Table::new();
    for key in HEAD {
        if let Some(v) = table.remove(key) {
            head.insert(key.into(), v);
        }
    }
    let out = format!(
        "{}\n{}",
        toml::to_string(&head).map_err(|e| e.to_string())?,
        toml::to_string(&table).map_err(|e| e.to_string())?
    );
    super::parse(Path::new("written.toml"), &out).map_err(|e| format!("the written scenario does not parse: {e}"))?;
    Ok(out)
}
