//! History files: `history.jsonl` (docs/history.md) read and written line by line, and
//! `verdicts.json` written atomically (temporary file, then rename) next to it.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use leasequake_reports::history::{Header, HistoryLine};
use leasequake_reports::{CheckResult, Verdict};

use crate::check::check;
use crate::error::HarnessError;

/// The history's file name in a run directory.
pub const HISTORY_FILE: &str = "history.jsonl";
/// The verdicts' file name in a run directory.
pub const VERDICTS_FILE: &str = "verdicts.json";

fn io(path: &Path, e: impl std::fmt::Display) -> HarnessError {
    HarnessError::History { path: path.to_path_buf(), detail: e.to_string() }
}

/// Reads a history: the lines that parse, and a description of each line that does not.
pub fn read(path: &Path) -> Result<(Vec<HistoryLine>, Vec<String>), HarnessError> {
    let file = File::open(path).map_err(|e| io(path, e))?;
    let mut lines = Vec::new();
    let mut unreadable = Vec::new();
    for (i, line) in BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| io(path, e))?;
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str(&line) {
            Ok(l) => lines.push(l),
            Err(e) => unreadable.push(format!("{}:{}: unreadable history line: {e}", path.display(), i + 1)),
        }
    }
    Ok((lines, unreadable))
}

/// A history's header, read from its first line alone (a history can be large); `None` when
/// that line is no header.
pub fn read_header(path: &Path) -> Result<Option<Header>, HarnessError> {
    let file = File::open(path).map_err(|e| io(path, e))?;
    let mut first = String::new();
    BufReader::new(file).read_line(&mut first).map_err(|e| io(path, e))?;
    Ok(match serde_json::from_str(&first) {
        Ok(HistoryLine::Header(h)) => Some(h),
        _ => None,
    })
}

/// Writes a history, one JSON object per line.
pub fn write(path: &Path, lines: &[HistoryLine]) -> Result<(), HarnessError> {
    let mut out = BufWriter::new(File::create(path).map_err(|e| io(path, e))?);
    for l in lines {
        serde_json::to_writer(&mut out, l).map_err(|e| io(path, e))?;
        out.write_all(b"\n").map_err(|e| io(path, e))?;
    }
    out.flush().map_err(|e| io(path, e))
}

/// Writes `bytes` to `path` atomically: a reader sees the old file or the new one, never half.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), HarnessError> {
    let tmp: PathBuf = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).map_err(|e| io(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| io(path, e))
}

/// Re-judges the history in run directory `dir` and rewrites its `verdicts.json`.
pub fn check_dir(dir: &Path) -> Result<CheckResult, HarnessError> {
    let (lines, unreadable) = read(&dir.join(HISTORY_FILE))?;
    let mut result = check(&lines);
    if !unreadable.is_empty() {
        result.inconclusive.extend(unreadable);
        if result.verdict == Verdict::Pass {
            result.verdict = Verdict::Inconclusive;
        }
    }
    let json = serde_json::to_vec_pretty(&result).map_err(|e| io(dir, e))?;
    write_atomically(&dir.join(VERDICTS_FILE), &json)?;
    Ok(result)
}
