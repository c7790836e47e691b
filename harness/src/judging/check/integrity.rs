//! Whether a history is whole (docs/history.md, Integrity). A history that breaks a rule is
//! judged anyway, so a reader sees what it holds, but its verdict is INCONCLUSIVE: damage must not
//! turn a FAIL into a PASS, nor a PASS into a FAIL. Nothing here reorders or repairs a line.

use std::collections::BTreeMap;

use leasequake_reports::history::{Header, HistoryLine, LineCounts, Snapshot};

use crate::history::{finish_sealed_digest, sealed_digest, tally};

/// The largest duration a header may carry, ms (a day): longer is no run this harness makes.
pub(super) const HEADER_MS_MAX: u64 = 86_400_000;

/// The largest stamp or sequence number a history may carry: CLOCK_MONOTONIC fits an i64, and
/// this leaves room to add a day of nanoseconds without overflow.
pub(super) const STAMP_MAX: u64 = i64::MAX as u64;

/// What the integrity rules found: problems (the verdict is inconclusive) and notes (what could
/// not be verified, for an older version).
#[derive(Default)]
pub(super) struct Integrity {
    pub problems: Vec<String>,
    pub notes: Vec<String>,
}

/// How the seal's digest is checked.
pub(crate) enum Digest {
    /// Write every line again and hash it (a history in memory).
    Recompute,
    /// From the hash of the lines before the snapshot as they were read (a history file).
    Read(sha2::Sha256),
    /// Not at all: the history was sealed in this process a moment ago and never left it (the
    /// simulation); the counts and the last audit seq are still checked.
    SealedHere,
}

/// Checks every integrity rule that `history` can be held to.
pub(super) fn integrity(history: &[HistoryLine], digest: Digest) -> Integrity {
    let mut out = Integrity::default();
    structure(history, &mut out.problems);
    let header = history.iter().find_map(|l| if let HistoryLine::Header(h) = l { Some(h) } else { None });
    let snapshot = history.iter().rev().find_map(|l| if let HistoryLine::Snapshot(s) = l { Some(s) } else { None });
    if let Some(h) = header {
        header_ranges(h, &mut out.problems);
    }
    stamps(history, header, snapshot, &mut out.problems);
    audit_order(history, header.map_or(0, |h| h.audit_after), &mut out.problems);
    if let Some(h) = header {
        kinds_of_version(history, h.version, &mut out.problems);
        if !h.witness && h.version >= 7 {
            if let Some(i) = history.iter().position(|l| matches!(l, HistoryLine::Wire(_))) {
                out.problems
                    .push(format!("line {}: a `wire` line in a history whose header records no witness", i + 1));
            }
        }
    }
    processes(history, &mut out.problems);
    wire_order(history, snapshot.map_or(&[][..], |s| &s.witness_gaps), &mut out.problems);
    model_order(history, header.map_or(0, |h| h.model_after), &mut out.problems);
    match (header, snapshot) {
        (Some(h), Some(s)) if h.version < 3 && s.seal.is_some() => out.problems.push(format!(
            "the header says history version {}, but the snapshot carries a seal, which only version 3 and later \
             write: the version was changed after the run (a downgrade would judge it without its seal)",
            h.version
        )),
        (Some(h), Some(s)) if h.version >= 3 => sealed(history, h, s, digest, &mut out.problems),
        (Some(h), _) if h.version < 3 => out.notes.push(format!(
            "history version {} carries no seal (line counts, last audit sequence, digest): its integrity could not be verified",
            h.version
        )),
        _ => {}
    }
    out
}

/// The header is line 1 and the snapshot the last line, each exactly once.
fn structure(history: &[HistoryLine], out: &mut Vec<String>) {
    let last = history.len().saturating_sub(1);
    for (i, l) in history.iter().enumerate() {
        match l {
            HistoryLine::Header(_) if i != 0 => {
                out.push(format!("line {}: a header after line 1 (a history has one header, first)", i + 1));
            }
            HistoryLine::Snapshot(_) if i != last => out.push(format!(
                "line {}: a snapshot before the last line (a history has one snapshot, last; {} line(s) follow it)",
                i + 1,
                last - i
            )),
            _ => {}
        }
    }
    if !history.is_empty() && !matches!(history[0], HistoryLine::Header(_)) {
        out.push("line 1 is not the header".into());
    }
}

/// The header's durations within a day, its stamps within [`STAMP_MAX`].
fn header_ranges(h: &Header, out: &mut Vec<String>) {
    let durations = [
        ("liveness_bound_ms", Some(h.liveness_bound_ms)),
        ("node_silence_ms", Some(h.node_silence_ms)),
        ("observer_gap_ms", Some(h.observer_gap_ms)),
        ("renew_ms", h.renew_ms),
        ("ttl_ms", h.ttl_ms),
        ("waste_budget_ms", h.waste_budget_ms),
    ];
    for (field, v) in durations {
        if let Some(v) = v.filter(|v| *v > HEADER_MS_MAX) {
            out.push(format!("line 1: header field `{field}` is {v}, outside 0..={HEADER_MS_MAX}"));
        }
    }
    for (field, v) in [("started_ns", h.started_ns), ("audit_after", h.audit_after)] {
        if v > STAMP_MAX {
            out.push(format!("line 1: header field `{field}` is {v}, outside 0..={STAMP_MAX}"));
        }
    }
}

/// Where a line's receipt stamp comes from: one writer stamps each source in order, so within a
/// source the stamps never go backwards.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Source<'a> {
    Node(&'a str, u64),
    Garbage(&'a str),
    Faults,
    Observer(&'a str),
    Audit,
    Environment(&'a str),
    Wire(&'a str, u64),
    Model,
}

impl Source<'_> {
    fn name(self) -> String {
        match self {
            Source::Node(node, inc) => format!("{node}'s lines (incarnation {inc})"),
            Source::Garbage(node) => format!("{node}'s unreadable lines"),
            Source::Faults => "the fault lines".into(),
            Source::Observer(instance) => format!("the observer's samples of {instance}"),
            Source::Audit => "the store's audit records".into(),
            Source::Environment(source) => format!("the environment events seen by {source}"),
            Source::Wire(link, conn) => format!("the witness records of {link}'s connection {conn}"),
            Source::Model => "the model service's audit records".into(),
        }
    }
}

fn source(l: &HistoryLine) -> Option<(Source<'_>, u64)> {
    match l {
        HistoryLine::Node { node, incarnation, received_ns, .. } => {
            Some((Source::Node(node, *incarnation), *received_ns))
        }
        HistoryLine::Garbage { node, received_ns, .. } => Some((Source::Garbage(node), *received_ns)),
        HistoryLine::Fault(f) => Some((Source::Faults, f.at_ns)),
        HistoryLine::Observer(o) => Some((Source::Observer(&o.instance), o.at_ns)),
        HistoryLine::Audit(a) => Some((Source::Audit, a.mono_ns)),
        HistoryLine::Environment(e) => Some((Source::Environment(&e.source), e.at_ns)),
        HistoryLine::Wire(w) => Some((Source::Wire(&w.link, w.conn), w.sent_ns)),
        HistoryLine::Model(m) => Some((Source::Model, m.arrived_ns)),
        HistoryLine::Header(_) | HistoryLine::Snapshot(_) => None,
    }
}

/// Within each source stamps never go backwards, and every stamp lies within the run.
fn stamps(history: &[HistoryLine], header: Option<&Header>, snapshot: Option<&Snapshot>, out: &mut Vec<String>) {
    let started = header.map_or(0, |h| h.started_ns);
    let ended = snapshot.map_or(STAMP_MAX, |s| s.ended_ns);
    if ended < started {
        out.push(format!("the snapshot's `ended_ns` {ended} is before the header's `started_ns` {started}"));
    }
    let mut last: BTreeMap<Source, (u64, usize)> = BTreeMap::new();
    let mut outside = 0u64;
    for (i, l) in history.iter().enumerate() {
        let Some((src, at)) = source(l) else { continue };
        if at < started || at > ended {
            if outside == 0 {
                out.push(format!(
                    "line {}: stamp {at} of {} is outside the run ({started} to {ended})",
                    i + 1,
                    src.name()
                ));
            }
            outside += 1;
        }
        if let Some((prev, line)) = last.insert(src, (at, i + 1)) {
            if at < prev {
                out.push(format!(
                    "line {}: {} go back in time ({} ns before line {line}): lines were moved or changed",
                    i + 1,
                    src.name(),
                    prev - at
                ));
            }
        }
    }
    if outside > 1 {
        out.push(format!("{outside} line(s) in all are stamped outside the run"));
    }
}

/// Audit records appear in store order: sequence numbers from `audit_after + 1`, each one more
/// than the last.
fn audit_order(history: &[HistoryLine], after: u64, out: &mut Vec<String>) {
    let mut expected = after.saturating_add(1);
    for (i, l) in history.iter().enumerate() {
        let HistoryLine::Audit(a) = l else { continue };
        if a.seq != expected {
            out.push(format!(
                "line {}: audit record seq {} where seq {expected} was due (records lost, added or moved)",
                i + 1,
                a.seq
            ));
            return;
        }
        expected = expected.saturating_add(1);
    }
}

/// How far back a node's own clock may seem to step between two of its events: threads that read
/// the clock and then wait their turn to write can land a little out of order; a process whose
/// clock went back further than this is no process at all.
const NODE_CLOCK_BACK_MAX_NS: u64 = 1_000_000_000;

/// What no process can do: a node's incarnations come back after a later one started (a restart
/// is a new incarnation, for good), or one incarnation's own clock (`mono_ns`) steps back.
fn processes(history: &[HistoryLine], out: &mut Vec<String>) {
    let mut incarnation: BTreeMap<&str, (u64, usize)> = BTreeMap::new();
    let mut clock: BTreeMap<(&str, u64), (u64, usize)> = BTreeMap::new();
    for (i, l) in history.iter().enumerate() {
        let HistoryLine::Node { node, incarnation: inc, event, .. } = l else { continue };
        if let Some((newest, line)) = incarnation.get(node.as_str()).copied().filter(|(n, _)| inc < n) {
            out.push(format!(
                "line {}: {node}'s incarnation {inc} speaks after incarnation {newest} (line {line}): an incarnation is never reused",
                i + 1
            ));
            return;
        }
        incarnation.insert(node, (*inc, i + 1));
        if event.mono_ns == 0 {
            continue;
        }
        if let Some((last, line)) = clock.insert((node, *inc), (event.mono_ns, i + 1)) {
            if last > event.mono_ns.saturating_add(NODE_CLOCK_BACK_MAX_NS) {
                out.push(format!(
                    "line {}: {node}'s own clock (mono_ns) went {} ms back from line {line}: no process's monotonic clock does",
                    i + 1,
                    (last - event.mono_ns) / 1_000_000
                ));
                return;
            }
        }
    }
}

/// Lines only a later version writes: a history that carries them under an older version's
/// header was changed after it was written (and would be judged without the rules they need).
fn kinds_of_version(history: &[HistoryLine], version: u32, out: &mut Vec<String>) {
    let needs = |l: &HistoryLine| match l {
        HistoryLine::Environment(_) => ("environment", 4),
        HistoryLine::Wire(_) => ("wire", 7),
        HistoryLine::Model(_) => ("model", 7),
        _ => ("", 0),
    };
    if let Some((i, (kind, since))) = history.iter().enumerate().find_map(|(i, l)| {
        let (kind, since) = needs(l);
        (since > version).then_some((i, (kind, since)))
    }) {
        out.push(format!(
            "line {}: a `{kind}` line, which only history version {since} and later write, in a version {version} history",
            i + 1
        ));
    }
}

/// Witness records appear per link in the witness's order, each seq one more than the last, from
/// seq 1 unless the snapshot says the link's records have a gap; a reply is never stamped before
/// its request.
fn wire_order(history: &[HistoryLine], gaps: &[String], out: &mut Vec<String>) {
    let mut next: BTreeMap<&str, u64> = BTreeMap::new();
    for (i, l) in history.iter().enumerate() {
        let HistoryLine::Wire(w) = l else { continue };
        let gap = gaps.iter().any(|g| g.split(':').next() == Some(w.link.as_str()));
        let due = *next.get(w.link.as_str()).unwrap_or(&if gap { w.seq } else { 1 });
        if w.seq != due {
            out.push(format!(
                "line {}: witness record {} seq {} where seq {due} was due (records lost, added or moved)",
                i + 1,
                w.link,
                w.seq
            ));
            return;
        }
        if w.reply_ns.is_some_and(|r| r < w.sent_ns) {
            out.push(format!("line {}: a witness record whose reply is stamped before its request", i + 1));
            return;
        }
        next.insert(&w.link, w.seq.saturating_add(1));
    }
}

/// Model service records appear in arrival order: seq from `model_after + 1`, each one more
/// than the last; an answer is never stamped before its arrival.
fn model_order(history: &[HistoryLine], after: u64, out: &mut Vec<String>) {
    let mut expected = after.saturating_add(1);
    for (i, l) in history.iter().enumerate() {
        let HistoryLine::Model(m) = l else { continue };
        if m.seq != expected {
            out.push(format!(
                "line {}: model record seq {} where seq {expected} was due (records lost, added or moved)",
                i + 1,
                m.seq
            ));
            return;
        }
        if m.finished_ns.is_some_and(|f| f < m.arrived_ns) {
            out.push(format!("line {}: a model call answered before it arrived", i + 1));
            return;
        }
        expected = expected.saturating_add(1);
    }
}

/// A version-3 history matches its seal: line counts, last audit sequence number, digest.
fn sealed(history: &[HistoryLine], h: &Header, s: &Snapshot, digest: Digest, out: &mut Vec<String>) {
    let Some(seal) = &s.seal else {
        out.push(format!("the snapshot carries no seal (history version {} requires one)", h.version));
        return;
    };
    let before = match history.split_last() {
        Some((HistoryLine::Snapshot(_), before)) => before,
        _ => history,
    };
    let (counts, last_seq) = tally(before, h.audit_after);
    if counts != seal.lines {
        let shown = |c: &LineCounts| {
            format!(
                "{} node, {} garbage, {} audit, {} fault, {} observer, {} environment, {} wire, {} model",
                c.node, c.garbage, c.audit, c.fault, c.observer, c.environment, c.wire, c.model
            )
        };
        out.push(format!(
            "the lines do not add up to the seal's counts (recorded {}; found {}): lines were lost or added",
            shown(&seal.lines),
            shown(&counts)
        ));
    }
    if last_seq != seal.audit_last_seq {
        out.push(format!(
            "the last audit record is seq {last_seq}, the seal says {}: audit records were lost or added",
            seal.audit_last_seq
        ));
    }
    // The file's own bytes when it was read (the snapshot is its last line: `structure` says so
    // otherwise), else the lines written again.
    let digest = match digest {
        Digest::Read(h) => finish_sealed_digest(h, s),
        Digest::Recompute => sealed_digest(before, s),
        Digest::SealedHere => return,
    };
    if digest != seal.digest {
        out.push("the lines do not match the seal's digest: a line was changed, added, removed or moved".into());
    }
}

#[cfg(test)]
mod tests;
