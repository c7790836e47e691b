//! `leasequake repro DIR`: a run directory's scenario as it ran (its schedule, its seed) run again
//! into a new suite. The nodes that ran are run again only as the user says, never because a file
//! says so.

use std::path::{Path, PathBuf};

use leasequake_reports::printable;

use super::run_loaded;
use crate::error::HarnessError;
use crate::exit::Exit;
use crate::history::{no_history, read_header, HISTORY_FILE};
use crate::run::RunOptions;

/// What `repro` was asked to do.
#[derive(Debug)]
pub struct Request {
    /// The run directory to replay.
    pub dir: PathBuf,
    /// Where the new suite goes.
    pub report_dir: PathBuf,
    /// The node command to run (split on whitespace).
    pub node_cmd: Option<String>,
    /// Run the command the history recorded (the user confirmed it).
    pub run_recorded_command: bool,
}

/// A recorded run, ready to run again: its scenario as run (`scenario::replay`), its seed, and
/// the node command the user chose.
pub struct Recorded {
    /// The scenario with its schedule as executed.
    pub scenario: crate::scenario::Scenario,
    /// The run's seed.
    pub seed: u64,
    /// The node command to run (none: the reference node).
    pub node_cmd: Option<Vec<String>>,
}

/// Reads the run in `dir` for running again. A node command recorded there runs only when the
/// user passes it (`node_cmd`) or confirms it (`run_recorded_command`); `verb` is the command
/// that asks (`repro`, `shrink`), for the message that says so.
///
/// # Errors
/// `dir` is no run directory, its files do not parse, or it names a command the user did not
/// confirm (a usage error naming the fix).
pub fn recorded(
    dir: &Path,
    node_cmd: Option<String>,
    run_recorded_command: bool,
    verb: &str,
) -> Result<Recorded, HarnessError> {
    if let Some(problem) = not_a_run_dir(dir).or_else(|| no_history(dir)) {
        return Err(HarnessError::usage(problem));
    }
    let mut scenario = crate::scenario::replay(dir).map_err(|e| HarnessError::usage(e.to_string()))?;
    let Some(h) = read_header(&dir.join(HISTORY_FILE))? else {
        return Err(HarnessError::usage(format!("{} has no history header: not a run directory", dir.display())));
    };
    let recorded = h.node_command.clone().or_else(|| scenario.nodes.command.take());
    let node_cmd = match (node_cmd, recorded) {
        (Some(c), _) => Some(c.split_whitespace().map(str::to_owned).collect()),
        (None, Some(c)) if run_recorded_command => Some(c),
        (None, Some(c)) => {
            let c = printable(&c.join(" "));
            let pass = crate::command_line::command([verb, &dir.display().to_string(), "--node-cmd", &c]);
            return Err(HarnessError::usage(format!(
                "this run's nodes were started by a recorded command:\n  {c}\n{verb} does not run a command read \
                 from a file. Pass it yourself:\n  {pass}\nor confirm the recorded one with --run-recorded-command",
            )));
        }
        (None, None) => None,
    };
    Ok(Recorded { scenario, seed: h.seed, node_cmd })
}

/// Replays the run in `req.dir`.
pub async fn run(req: Request) -> Result<Exit, HarnessError> {
    let dir = &req.dir;
    let rec = recorded(dir, req.node_cmd, req.run_recorded_command, "repro")?;
    super::usable_report_dir(&req.report_dir)?;
    let nodes = rec.node_cmd.as_ref().map(|c| format!(", nodes `{}`", c.join(" "))).unwrap_or_default();
    let opts = RunOptions {
        seed: Some(rec.seed),
        node_cmd: rec.node_cmd,
        attach: None,
        progress: crate::progress::Progress::stderr(),
    };
    eprintln!(
        "replaying {} with seed {} and its {} recorded faults{nodes}",
        rec.scenario.name,
        rec.seed,
        rec.scenario.faults.len()
    );
    run_loaded(vec![(dir.join("scenario.toml"), rec.scenario)], &req.report_dir, &opts, 1, None, false).await
}

/// Why `dir` is no run directory `repro` can replay, naming the fix (a suite directory lists its
/// runs); `None` when it holds a scenario as run.
fn not_a_run_dir(dir: &Path) -> Option<String> {
    const SHOWN: usize = 8;
    if dir.join("scenario.toml").is_file() {
        return None;
    }
    if !dir.is_dir() {
        return Some(format!(
            "{} is not a directory: give a run directory, e.g. reports-out/latest/02-owner-cut-from-redis",
            dir.display()
        ));
    }
    let mut runs: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().join("scenario.toml").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    runs.sort();
    if runs.is_empty() {
        return Some(format!(
            "{} is not a run directory (it has no scenario.toml): give one, e.g. reports-out/latest/02-owner-cut-from-redis",
            dir.display()
        ));
    }
    let more = runs.len().saturating_sub(SHOWN);
    let listed: Vec<String> = runs.iter().take(SHOWN).map(|r| dir.join(r).display().to_string()).collect();
    Some(format!(
        "{} is a suite directory; `repro` replays one of its runs:\n  {}{}",
        dir.display(),
        listed.iter().map(|d| crate::command_line::command(["repro", d])).collect::<Vec<_>>().join("\n  "),
        if more > 0 { format!("\n  ... and {more} more") } else { String::new() }
    ))
}
