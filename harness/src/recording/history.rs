//! History files: `history.jsonl` (docs/history.md) read and written line by line, and
//! `verdicts.json` written atomically (temporary file, then rename) next to it.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use leasequake_reports::history::{Header, HistoryLine, LineCounts, Seal, Snapshot};
use leasequake_reports::{printable, CheckResult, Verdict, REASONS_MAX};
use sha2::{Digest, Sha256};

use crate::check::check_read;
use crate::error::HarnessError;

/// The history's file name in a run directory.
pub const HISTORY_FILE: &str = "history.jsonl";
/// The verdicts' file name in a run directory.
pub const VERDICTS_FILE: &str = "verdicts.json";

fn io(path: &Path, e: impl std::fmt::Display) -> HarnessError {
    HarnessError::History { path: path.to_path_buf(), detail: e.to_string() }
}

/// Reads a history: the lines that parse, and a description of the first lines that do not
/// (at most [`REASONS_MAX`], then how many more).
pub fn read(path: &Path) -> Result<(Vec<HistoryLine>, Vec<String>), HarnessError> {
    read_hashed(path).map(|(lines, unreadable, _)| (lines, unreadable))
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

/// The digest a sealed history's snapshot must carry: SHA-256 (lowercase hex) of every line
/// before it as this version writes it (its JSON, then `\n`: a parsed line writes back the
/// same), and of the snapshot itself with an empty digest (its own fields, counts included, are
/// covered too).
#[must_use]
pub fn sealed_digest(before: &[HistoryLine], snapshot: &Snapshot) -> String {
    let mut h = Sha256::new();
    for l in before {
        h.update(serde_json::to_vec(l).unwrap_or_default());
        h.update(b"\n");
    }
    finish_sealed_digest(h, snapshot)
}

/// [`sealed_digest`] from the hash of the lines before the snapshot as they were read (see
/// [`read_hashed`]): no line is written again.
#[must_use]
pub fn finish_sealed_digest(mut before: Sha256, snapshot: &Snapshot) -> String {
    let mut blank = snapshot.clone();
    if let Some(seal) = blank.seal.as_mut() {
        seal.digest.clear();
    }
    before.update(serde_json::to_vec(&HistoryLine::Snapshot(blank)).unwrap_or_default());
    before.update(b"\n");
    before.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Hashes a history's lines as they are read, trimmed (so CRLF endings do not count): the
/// returned state covers every non-blank line but the last, which is the snapshot's place.
#[derive(Default)]
pub struct LineHasher {
    before_last: Sha256,
    all: Sha256,
}

impl LineHasher {
    /// One more non-blank line.
    pub fn line(&mut self, line: &str) {
        self.before_last = self.all.clone();
        self.all.update(line.trim().as_bytes());
        self.all.update(b"\n");
    }
    /// The hash of every line but the last.
    #[must_use]
    pub fn before_last(self) -> Sha256 {
        self.before_last
    }
}

/// [`read`], and the hash of every line but the last as written in the file (the seal is checked
/// from it, with no line written again: a history of a million lines is hashed as it is read).
pub fn read_hashed(path: &Path) -> Result<(Vec<HistoryLine>, Vec<String>, Sha256), HarnessError> {
    let file = File::open(path).map_err(|e| io(path, e))?;
    let mut reader = BufReader::new(file);
    let mut hasher = LineHasher::default();
    let mut lines = Vec::new();
    let mut unreadable = Vec::new();
    let mut more = 0u64;
    let mut bytes = Vec::new();
    // Bounded by the file: every turn reads one line or ends.
    for i in 0usize.. {
        bytes.clear();
        if reader.read_until(b'\n', &mut bytes).map_err(|e| io(path, e))? == 0 {
            break;
        }
        let (line, problem) = match std::str::from_utf8(&bytes) {
            Ok(text) => (text.to_owned(), None),
            Err(e) => (
                String::from_utf8_lossy(&bytes).into_owned(),
                Some(format!("not UTF-8 (an invalid byte at column {})", e.valid_up_to() + 1)),
            ),
        };
        if line.trim().is_empty() {
            continue;
        }
        hasher.line(&line);
        let parsed = match problem {
            Some(p) => Err(p),
            None => serde_json::from_str(&line).map_err(|e| e.to_string()),
        };
        match parsed {
            Ok(l) => lines.push(l),
            Err(_) if unreadable.len() >= REASONS_MAX => more += 1,
            Err(e) => unreadable.push(format!(
                "{}:{}: unreadable history line ({}): {}",
                path.display(),
                i + 1,
                printable(&e),
                printable(line.trim())
            )),
        }
    }
    if more > 0 {
        unreadable.push(format!("... and {more} more unreadable lines"));
    }
    Ok((lines, unreadable, hasher.before_last()))
}

/// What each kind of line adds up to, and the last audit sequence number (`after` when none).
#[must_use]
pub fn tally(lines: &[HistoryLine], after: u64) -> (LineCounts, u64) {
    let mut c = LineCounts::default();
    let mut last = after;
    for l in lines {
        match l {
            HistoryLine::Node { .. } => c.node += 1,
            HistoryLine::Garbage { .. } => c.garbage += 1,
            HistoryLine::Audit(a) => {
                c.audit += 1;
                last = last.max(a.seq);
            }
            HistoryLine::Fault(_) => c.fault += 1,
            HistoryLine::Observer(_) => c.observer += 1,
            HistoryLine::Environment(_) => c.environment += 1,
            HistoryLine::Wire(_) => c.wire += 1,
            HistoryLine::Model(_) => c.model += 1,
            HistoryLine::Header(_) | HistoryLine::Snapshot(_) => {}
        }
    }
    (c, last)
}

/// Seals a finished history: its closing snapshot (the last line) records the counts, the last
/// audit sequence number and the digest of every line before it. Does nothing to a history that
/// does not end in a snapshot.
pub fn seal(lines: &mut [HistoryLine]) {
    seal_counts(lines);
    let Some((HistoryLine::Snapshot(snap), before)) = lines.split_last_mut() else { return };
    let digest = sealed_digest(before, snap);
    if let Some(seal) = snap.seal.as_mut() {
        seal.digest = digest;
    }
}

/// The seal without its digest (the counts and the last audit seq): for a history judged in this
/// process at once (`check_sealed_here`, the simulation's), which [`seal`]s it in full before it
/// is ever written.
pub fn seal_counts(lines: &mut [HistoryLine]) {
    let after = match lines.first() {
        Some(HistoryLine::Header(h)) => h.audit_after,
        _ => 0,
    };
    let Some((HistoryLine::Snapshot(snap), before)) = lines.split_last_mut() else { return };
    let (counts, audit_last_seq) = tally(before, after);
    snap.seal = Some(Seal { audit_last_seq, lines: counts, digest: String::new() });
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
/// Nothing is written through a link: the temporary file is created new (a name planted there,
/// a link among them, makes the write fail rather than follow it), and the rename replaces
/// whatever `path` was (a link itself, never its target).
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), HarnessError> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let tmp: PathBuf = path.with_file_name(format!(".{name}.{}.{nanos}.tmp", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .and_then(|mut f| f.write_all(bytes).and_then(|()| f.sync_all()));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(io(&tmp, e));
    }
    std::fs::rename(&tmp, path).map_err(|e| io(path, e))
}

/// Re-judges the history in run directory `dir` and rewrites its `verdicts.json`; a `dir` with no
/// history is a usage error naming the fix.
pub fn check_dir(dir: &Path) -> Result<CheckResult, HarnessError> {
    let result = match judge_dir(dir) {
        Ok(r) => r,
        Err(e) => {
            // No verdict of an earlier judgement may stand beside a history that could not be
            // judged now (a later reader would take its PASS): it goes (a link: the link itself).
            let old = dir.join(VERDICTS_FILE);
            if old.symlink_metadata().is_ok() {
                let _ = std::fs::remove_file(&old);
            }
            return Err(e);
        }
    };
    let json = serde_json::to_vec_pretty(&result).map_err(|e| io(dir, e))?;
    write_atomically(&dir.join(VERDICTS_FILE), &json)?;
    Ok(result)
}

/// Judges the history in run directory `dir` (its `verdicts.json` neither read nor written); a
/// `dir` with no history is a usage error naming the fix.
pub fn judge_dir(dir: &Path) -> Result<CheckResult, HarnessError> {
    if let Some(problem) = no_history(dir) {
        return Err(HarnessError::usage(problem));
    }
    let (lines, unreadable, before_last) = read_hashed(&dir.join(HISTORY_FILE))?;
    let mut result = check_read(&lines, Some(before_last));
    if !unreadable.is_empty() {
        // An unreadable line is a line the checker could not judge: nothing stands on the rest.
        result.inconclusive = unreadable.into_iter().chain(std::mem::take(&mut result.inconclusive)).collect();
        result.verdict = Verdict::Inconclusive;
    }
    Ok(result)
}

/// Why `dir` holds no history to judge or replay, naming the fix; `None` when it does.
pub fn no_history(dir: &Path) -> Option<String> {
    let file = dir.join(HISTORY_FILE);
    if !dir.is_dir() {
        return Some(format!(
            "{} is not a directory: give a run directory, e.g. reports-out/latest/01-no-faults",
            dir.display()
        ));
    }
    match file.symlink_metadata() {
        Err(_) => Some(format!(
            "{} has no {HISTORY_FILE}: give a run directory (one per scenario run, inside a suite directory)",
            dir.display()
        )),
        Ok(m) if m.file_type().is_symlink() => Some(format!(
            "{} is a symbolic link: a run directory's history is read as it is, never through a link (copy the file in its place)",
            file.display()
        )),
        Ok(m) if !m.is_file() => {
            Some(format!("{} is not a regular file: a history is one JSON line per record", file.display()))
        }
        Ok(_) => None,
    }
}
