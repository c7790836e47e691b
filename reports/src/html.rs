//! `report.html`: one self-contained page (no script, no network, no server) with the suite's
//! index (failures first) and, per scenario, a timeline on one time axis: fault windows shaded
//! across every lane, who holds the key on each Redis instance (the observer), and per node what it
//! believed (its ownership intervals, its loss) and what it did (checkpoints, store writes coloured
//! accepted / rejected / violating). Hovering any mark shows its event (SVG titles). Long
//! histories are aggregated per pixel column, so a page stays light whatever the run's length.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write;

use crate::history::{EnvChange, EventKind, FaultPhase, HistoryLine};
use crate::junit::xml as esc;
use crate::suite::{ScenarioRun, Shown, Suite};
use crate::PropertyStatus;

const LEFT: f64 = 150.0;
const WIDTH: f64 = 1000.0;
const LANE: f64 = 22.0;
/// Node colours (n1, n2, ...): from the Okabe-Ito colour-blind-safe set and its neighbours, with no
/// red, no grey and no near-black, which mean outcomes. A node is also named on its lanes and in
/// its key-holder bars, so nothing rests on colour alone.
pub(crate) const PALETTE: [&str; 8] =
    ["#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#44aa99", "#999933", "#6a3d9a"];
/// Outcome colours, never a node's: ink (checkpoints, accepted and rejected writes, told apart by
/// shape: tick, filled square, hollow square), red (a violating write, a loss, a failed check,
/// a fault window: the bad things, again each its own shape) and light grey (unreachable).
pub(crate) const INK: &str = "#1d2330";
pub(crate) const RED: &str = "#d50000";
pub(crate) const FAULT: &str = "#c62828";
pub(crate) const UNREACHABLE: &str = "#d0d5dc";

const STYLE: &str = r#"
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#1d2330;max-width:1260px}
h1{font-size:20px;margin:0 0 4px} h2{font-size:17px;margin:36px 0 6px;padding-top:10px;border-top:1px solid #dde2ea}
h3{font-size:14px;margin:18px 0 6px}
.meta{color:#5b6472} table{border-collapse:collapse;margin:6px 0 12px;display:block;max-width:100%;overflow-x:auto} td,th{padding:3px 10px;border-bottom:1px solid #e6e9ef;text-align:left;vertical-align:top}
th{font-weight:600;color:#3b4250} .num{text-align:right;font-variant-numeric:tabular-nums}
.b{display:inline-block;min-width:92px;text-align:center;padding:1px 6px;border-radius:4px;font-weight:700;font-size:12px;color:#fff}
.FAIL{background:#c62828}.INCONCLUSIVE{background:#8d6e00}.XFAIL{background:#6a4fb3}.PASS{background:#2e7d32}
.counts span{margin-right:14px} pre{background:#f4f6f9;padding:8px 10px;font-size:12px;border-radius:4px;white-space:pre-wrap;overflow-wrap:anywhere}
.tl{overflow-x:auto} .tl svg{display:block;width:100%;min-width:640px;height:auto}
.viol{border-left:4px solid #c62828;padding:4px 12px;margin:10px 0;background:#fff5f5}
.held{color:#2e7d32}.violated{color:#c62828;font-weight:700}.inconclusive{color:#8d6e00}.not_applicable{color:#7a8290}
svg text{font:12px system-ui,sans-serif} .legend span{margin-right:14px;white-space:nowrap} .sw{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:-1px}
"#;

/// How many violations of one property quote their history lines.
const EXCERPTS_PER_PROPERTY: usize = 5;

/// The plentiful marks: every one is drawn at its pixel, but a lane's marks of one kind share one
/// path and one title (their count), so a long suite's page stays small; the rare marks (a failed
/// check, a loss, a rejected or violating write) keep a title each.
const DENSE: [&str; 2] = ["ckpt", "accepted"];

/// Draws the [`DENSE`] marks: per lane and kind, one path through every pixel that has one.
fn dense_marks(o: &mut String, marks: &Marks, lanes: &[String], y: impl Fn(usize) -> f64) {
    // (path, marks, last pixel): after a lane's first mark, each moves relative to the last.
    let mut paths: BTreeMap<(usize, &str), (String, u64, Option<i64>)> = BTreeMap::new();
    for ((lane, px, class), (count, _)) in marks.cells.iter().filter(|((_, _, c), _)| DENSE.contains(c)) {
        let (d, n, last) = paths.entry((*lane, *class)).or_default();
        let yl = y(*lane);
        let _ = match (*class, *last) {
            ("ckpt", None) => write!(d, "M{px}.5 {:.0}v8", yl + 2.0),
            ("ckpt", Some(l)) => write!(d, "m{} -8v8", px - l),
            (_, None) => write!(d, "M{} {:.0}h5v5h-5z", px - 2, yl + 13.0),
            (_, Some(l)) => write!(d, "m{} 0h5v5h-5z", px - l),
        };
        *last = Some(*px);
        *n += count;
    }
    for ((lane, class), (d, n, _)) in paths {
        let who = lanes.get(lane).map_or("", |l| l.split(' ').next().unwrap_or(""));
        let (paint, what) = match class {
            "ckpt" => (format!("fill=\"none\" stroke=\"{INK}\""), "checkpoints passed"),
            _ => (format!("fill=\"{INK}\""), "writes accepted"),
        };
        let _ = write!(o, "<path d=\"{d}\" {paint}><title>{who}: {n} {what} (one mark per pixel)</title></path>");
    }
}

/// One mark column: a pixel bucket in a lane.
#[derive(Default)]
struct Marks {
    /// (lane, x pixel, class) -> (count, first title).
    cells: BTreeMap<(usize, i64, &'static str), (u64, String)>,
}

impl Marks {
    fn add(&mut self, lane: usize, x: f64, class: &'static str, title: impl FnOnce() -> String) {
        let e = self.cells.entry((lane, x.round() as i64, class)).or_insert_with(|| (0, title()));
        e.0 += 1;
    }
}

fn status_word(s: PropertyStatus) -> &'static str {
    match s {
        PropertyStatus::Held => "held",
        PropertyStatus::Violated => "violated",
        PropertyStatus::NotApplicable => "not_applicable",
        PropertyStatus::Inconclusive => "inconclusive",
    }
}

/// Renders the whole report; `histories[i]` is scenario `i`'s history, when it could be read.
#[must_use]
pub fn render(suite: &Suite, histories: &[Option<Vec<HistoryLine>>]) -> String {
    let mut o = String::with_capacity(64 * 1024);
    let _ = write!(o, "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>leasequake: {:?}</title><style>{STYLE}</style></head><body>", suite.verdict);
    let versions: Vec<String> = suite.versions.iter().map(|(k, v)| format!("{k} {v}")).collect();
    let _ = write!(
        o,
        "<h1>leasequake · {} · {} scenario runs</h1><div class=\"meta\">{}</div>",
        esc(&suite.started_utc),
        suite.scenarios.len(),
        esc(&versions.join(" · "))
    );
    let _ = write!(o, "<p class=\"counts\">");
    for s in [Shown::Fail, Shown::Inconclusive, Shown::ExpectedFail, Shown::Pass] {
        let _ = write!(o, "<span><span class=\"b {0}\">{0}</span> {1}</span>", s.label(), suite.count(s));
    }
    let _ = write!(o, "<span>total {:.0} s</span></p>", suite.took_s);
    if let Some(why) = &suite.stopped {
        let _ = write!(o, "<p class=\"viol\"><b>Stopped early:</b> {}</p>", esc(why));
    }
    o.push_str("<table><tr><th>scenario</th><th>verdict</th><th class=\"num\">time</th><th>finding</th></tr>");
    for i in suite.order() {
        let r = &suite.scenarios[i];
        let _ = write!(
            o,
            "<tr><td><a href=\"#s{i}\">{}</a></td><td><span class=\"b {1}\">{1}</span></td><td class=\"num\">{2:.0} s</td><td>{3}</td></tr>",
            esc(&r.name),
            r.shown().label(),
            r.took_s,
            esc(&r.finding())
        );
    }
    o.push_str("</table>");
    if let Some(c) = &suite.coverage {
        coverage(&mut o, c);
    }
    for i in suite.order() {
        scenario(&mut o, i, &suite.scenarios[i], histories.get(i).and_then(Option::as_ref));
    }
    o.push_str("</body></html>\n");
    o
}

/// The fault coverage table: a row per kind, a column per phase, `owner/other` counts.
fn coverage(o: &mut String, c: &crate::coverage::Coverage) {
    use crate::coverage::Phase;
    o.push_str("<h2 id=\"coverage\">Fault coverage</h2><p class=\"meta\">Faults by kind and by the phase their target was in when they began: began while the target held the lease / did not; empty cells were never exercised.</p><table><tr><th>fault</th>");
    for p in Phase::ALL {
        let _ = write!(o, "<th>{}</th>", p.name());
    }
    o.push_str("</tr>");
    for k in crate::history::FaultKind::ALL {
        let _ = write!(o, "<tr><td>{}</td>", k.name());
        for p in Phase::ALL {
            let (owner, other) = c.count(k, p);
            if owner + other == 0 {
                o.push_str("<td class=\"num\">-</td>");
            } else {
                let _ = write!(o, "<td class=\"num\">{owner}/{other}</td>");
            }
        }
        o.push_str("</tr>");
    }
    o.push_str("</table>");
}

fn scenario(o: &mut String, i: usize, r: &ScenarioRun, history: Option<&Vec<HistoryLine>>) {
    let _ = write!(
        o,
        "<h2 id=\"s{i}\"><span class=\"b {0}\">{0}</span> {1}</h2><div class=\"meta\">{2} · seed {3} · {4:.0} s · <a href=\"{5}/history.jsonl\">history.jsonl</a> · <a href=\"{5}/verdicts.json\">verdicts.json</a> · <a href=\"{5}/harness.log\">harness.log</a> · <a href=\"{5}/logs/\">container and node logs</a> · <a href=\"{5}/scenario.toml\">scenario as run</a></div>",
        r.shown().label(),
        esc(&r.name),
        esc(&r.description),
        r.seed,
        r.took_s,
        esc(&r.dir)
    );
    let _ = write!(o, "<p><b>{}</b></p>", esc(&r.finding()));
    if let Some(why) = r.extension() {
        let _ = write!(o, "<p class=\"meta\">The run {}.</p>", esc(&why));
    }
    if let Some(e) = &r.expected {
        let _ = write!(o, "<p class=\"meta\">Expected to violate <b>{}</b>: {}</p>", esc(&e.property), esc(&e.why));
    }
    let _ = write!(o, "<p class=\"meta\">Replay exactly:</p><pre>{}</pre>", esc(&r.repro));
    if !r.rerun.is_empty() {
        let _ = write!(o, "<p class=\"meta\">Or from the scenario file:</p><pre>{}</pre>", esc(&r.rerun));
    }
    if let Some(err) = &r.error {
        let _ = write!(o, "<p class=\"viol\">The run could not finish: {}</p>", esc(err));
    }
    // The offending write of each violation: the one that arrived last (the stale write after the
    // newer one; the second of two writes under one fence). The others are its context.
    // Numbered as the violations below are (`v{i}-{k}`), so each mark links to its own; a write
    // that offends twice links to the first.
    let mut evidence_seqs: BTreeMap<u64, usize> = BTreeMap::new();
    let shown = r.result.iter().flat_map(|res| res.properties.iter()).filter(|p| p.status == PropertyStatus::Violated);
    for (k, v) in shown.flat_map(|p| p.violations.iter()).enumerate() {
        if let Some(seq) = v.evidence.iter().filter_map(|e| e.seq).max() {
            evidence_seqs.entry(seq).or_insert(k);
        }
    }
    if let Some(h) = history {
        timeline(o, i, r, h, &evidence_seqs);
    } else {
        o.push_str("<p class=\"meta\">No history to draw.</p>");
    }
    let Some(res) = &r.result else { return };
    o.push_str("<h3>Properties</h3><table>");
    for p in &res.properties {
        let _ = write!(
            o,
            "<tr><td>{}</td><td class=\"{1}\">{1}</td><td>{2}</td></tr>",
            esc(&p.name),
            status_word(p.status),
            esc(&p.sentence)
        );
    }
    o.push_str("</table>");
    for why in &res.inconclusive {
        let _ = write!(o, "<p class=\"inconclusive\">Inconclusive: {}</p>", esc(why));
    }
    for note in &res.notes {
        let _ = write!(o, "<p class=\"not_applicable\">Note: {}</p>", esc(note));
    }
    let mut v_index = 0;
    for p in res.properties.iter().filter(|p| p.status == PropertyStatus::Violated) {
        for (k, v) in p.violations.iter().enumerate() {
            let _ = write!(
                o,
                "<div class=\"viol\" id=\"v{i}-{v_index}\"><b>{}</b>: {}<br><span class=\"meta\">faults in effect: {}</span>",
                esc(&p.name),
                esc(&v.summary),
                esc(&if v.faults_active.is_empty() { "none".to_owned() } else { v.faults_active.join(", ") })
            );
            if !v.evidence.is_empty() {
                o.push_str("<table><tr><th>evidence</th><th>node</th><th>token</th><th class=\"num\">fence</th><th class=\"num\">seq</th><th>what</th></tr>");
            }
            for e in &v.evidence {
                let _ = write!(
                    o,
                    "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td></tr>",
                    esc(&e.label),
                    esc(&e.node),
                    esc(&e.token),
                    e.fence,
                    e.seq.map(|s| s.to_string()).unwrap_or_default(),
                    esc(&e.what)
                );
            }
            if !v.evidence.is_empty() {
                o.push_str("</table>");
            }
            // The history quoted for the first few of a property; the rest name their seqs above
            // (a hazard's expected failure can list dozens, each with the same story).
            match history {
                Some(h) if k < EXCERPTS_PER_PROPERTY => {
                    let excerpt = excerpt(h, v.evidence.iter().filter_map(|e| e.seq).collect(), &v.evidence);
                    if !excerpt.is_empty() {
                        let _ = write!(o, "<div class=\"meta\">From the history:</div><pre>{}</pre>", esc(&excerpt));
                    }
                }
                Some(_) if k == EXCERPTS_PER_PROPERTY => {
                    let _ = write!(
                        o,
                        "<div class=\"meta\">History excerpts are quoted for the first {EXCERPTS_PER_PROPERTY} violations of a property; this run's history.jsonl holds every line by its seq.</div>"
                    );
                }
                _ => {}
            }
            o.push_str("</div>");
            v_index += 1;
        }
        if p.violation_count > p.violations.len() as u64 {
            let _ = write!(
                o,
                "<p class=\"meta\">{} more violations of {} are in verdicts.json's count; the first {} are shown.</p>",
                p.violation_count - p.violations.len() as u64,
                esc(&p.name),
                p.violations.len()
            );
        }
    }
    if !res.metrics.nodes.is_empty() {
        o.push_str("<h3>Work and loss, per node</h3><table><tr><th>node</th><th class=\"num\">syncs</th><th class=\"num\">rounds lost</th><th class=\"num\">other aborts</th><th class=\"num\">model calls after loss</th><th class=\"num\">store calls after loss</th><th class=\"num\">ms wasted</th><th class=\"num\">loss to stop, max ms</th></tr>");
        for (n, m) in &res.metrics.nodes {
            let _ = write!(
                o,
                "<tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
                esc(n),
                m.syncs,
                m.lost_rounds,
                m.other_aborts,
                m.wasted_model_calls,
                m.wasted_store_calls,
                m.wasted_ms,
                m.loss_to_last_action_ms_max
            );
        }
        let _ = write!(
            o,
            "</table><p class=\"meta\">Writes rejected by fencing: {} · writes that landed while another node owned the lease: {}</p>",
            res.metrics.fenced_rejections, res.metrics.landed_while_another_owned
        );
    }
    if let Some(h) = history {
        faults_table(o, h);
    }
}

/// The audit lines named by the evidence, and each evidence node's lines just before it.
fn excerpt(h: &[HistoryLine], seqs: BTreeSet<u64>, evidence: &[crate::Evidence]) -> String {
    let mut out = Vec::new();
    for e in evidence {
        let before: Vec<&HistoryLine> = h
            .iter()
            .filter(|l| matches!(l, HistoryLine::Node { node, received_ns, .. } if *node == e.node && *received_ns <= e.at_ns.max(1)))
            .collect();
        for l in before.iter().rev().take(3).rev() {
            out.push(serde_json::to_string(l).unwrap_or_default());
        }
    }
    for l in h {
        if let HistoryLine::Audit(a) = l {
            if seqs.contains(&a.seq) {
                out.push(serde_json::to_string(l).unwrap_or_default());
            }
        }
    }
    out.dedup();
    out.join("\n")
}

fn faults_table(o: &mut String, h: &[HistoryLine]) {
    let t0 = start_ns(h);
    type Phases = Vec<(FaultPhase, u64, String)>;
    let mut rows: BTreeMap<u64, (String, String, Phases)> = BTreeMap::new();
    for l in h {
        if let HistoryLine::Fault(f) = l {
            rows.entry(f.id).or_insert_with(|| (f.fault.to_string(), f.target.clone(), vec![])).2.push((
                f.phase,
                f.at_ns,
                f.detail.clone(),
            ));
        }
    }
    if rows.is_empty() {
        return;
    }
    o.push_str("<h3>Faults as executed</h3><table><tr><th>#</th><th>fault</th><th>target</th><th>phases (s from start)</th><th>what the probe saw</th></tr>");
    for (id, (fault, target, phases)) in rows {
        let times: Vec<String> = phases
            .iter()
            .map(|(p, at, _)| format!("{p:?} {:.2}", at.saturating_sub(t0) as f64 / 1e9).to_lowercase())
            .collect();
        let details: Vec<&str> = phases.iter().map(|(_, _, d)| d.as_str()).filter(|d| !d.is_empty()).collect();
        let _ = write!(
            o,
            "<tr><td>{id}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&fault),
            esc(&target),
            esc(&times.join(" · ")),
            esc(&details.join(" · "))
        );
    }
    o.push_str("</table>");
}

fn start_ns(h: &[HistoryLine]) -> u64 {
    h.iter()
        .find_map(|l| match l {
            HistoryLine::Header(hd) => Some(hd.started_ns),
            _ => None,
        })
        .unwrap_or(0)
}

fn node_colour(node: &str) -> &'static str {
    let n: usize = node.trim_start_matches('n').parse().unwrap_or(0);
    PALETTE[n.saturating_sub(1) % PALETTE.len()]
}

/// One mark per environment event on its lane (centred at `mid`): a Sentinel's announcement a
/// hollow ring, a container or proxy change a filled dot (ink: no node's colour), each titled with
/// what changed and who saw it.
fn environment_marks(o: &mut String, h: &[HistoryLine], mid: f64, at: impl Fn(u64) -> (f64, f64)) {
    for l in h {
        let HistoryLine::Environment(e) = l else { continue };
        let (xe, t) = at(e.at_ns);
        let fill = match e.change {
            EnvChange::Sentinel | EnvChange::SwitchMaster => "#fff",
            _ => INK,
        };
        let _ = write!(
            o,
            "<circle cx=\"{xe:.1}\" cy=\"{mid:.1}\" r=\"4\" fill=\"{fill}\" stroke=\"{INK}\"><title>{t:.2} s, {} saw {}: {}</title></circle>",
            esc(&e.source),
            esc(&e.subject),
            esc(&e.detail)
        );
    }
}

/// Whose each token of the history is, from the nodes' `acquired` events (protocol 3: a lock
/// library's token says nothing of its node).
fn token_owners(h: &[HistoryLine]) -> HashMap<&str, &str> {
    let mut owners = HashMap::new();
    for l in h {
        if let HistoryLine::Node { node, event, .. } = l {
            if let EventKind::Acquired { token, .. } = &event.kind {
                owners.insert(token.as_str(), node.as_str());
            }
        }
    }
    owners
}

/// The node a token belongs to: its reported owner, else its `node/` prefix (`n2/1/...` -> `n2`).
fn token_node<'a>(owners: &HashMap<&'a str, &'a str>, token: &'a str) -> &'a str {
    owners.get(token).copied().unwrap_or_else(|| token.split('/').next().unwrap_or(token))
}

#[allow(clippy::too_many_lines)]
/// `violating`: the offending write's audit seq -> the index of its violation on the page.
fn timeline(o: &mut String, i: usize, r: &ScenarioRun, h: &[HistoryLine], violating: &BTreeMap<u64, usize>) {
    let t0 = start_ns(h);
    let end = h
        .iter()
        .map(|l| match l {
            HistoryLine::Snapshot(s) => s.ended_ns,
            HistoryLine::Node { received_ns, .. } => *received_ns,
            HistoryLine::Audit(a) => a.mono_ns,
            HistoryLine::Observer(s) => s.at_ns,
            HistoryLine::Fault(f) => f.at_ns,
            HistoryLine::Environment(e) => e.at_ns,
            _ => 0,
        })
        .max()
        .unwrap_or(t0)
        .max(t0 + 1);
    let span = (end - t0) as f64;
    let x = |ns: u64| LEFT + (ns.saturating_sub(t0) as f64 / span) * WIDTH;
    let nodes: BTreeSet<&str> = h
        .iter()
        .filter_map(|l| match l {
            HistoryLine::Node { node, .. } => Some(node.as_str()),
            _ => None,
        })
        .collect();
    // Lanes: faults, each Redis instance, then per node "believes" and "does".
    let instances: BTreeSet<&str> = h
        .iter()
        .filter_map(|l| match l {
            HistoryLine::Observer(s) => Some(s.instance.as_str()),
            _ => None,
        })
        .collect();
    let mut lanes: Vec<String> = vec!["faults".into()];
    lanes.extend(instances.iter().map(|s| (*s).to_owned()));
    let node_lane: HashMap<&str, usize> = nodes.iter().enumerate().map(|(k, n)| (*n, lanes.len() + 2 * k)).collect();
    for n in &nodes {
        lanes.push(format!("{n} believes"));
        lanes.push(format!("{n} does"));
    }
    // The environment's own changes (containers, Sentinels, proxies), when there were any.
    let env_lane = h.iter().any(|l| matches!(l, HistoryLine::Environment(_))).then(|| {
        lanes.push("environment".into());
        lanes.len() - 1
    });
    let top = 26.0;
    let height = top + lanes.len() as f64 * LANE + 12.0;
    let y = |lane: usize| top + lane as f64 * LANE;
    let _ = write!(
        o,
        "<div class=\"tl\"><svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {:.0} {height:.0}\" preserveAspectRatio=\"xMinYMin meet\" role=\"img\" aria-label=\"timeline of {}\">",
        LEFT + WIDTH + 20.0,
        esc(&r.name)
    );
    // Lane backgrounds and labels.
    for (k, name) in lanes.iter().enumerate() {
        let fill = if k % 2 == 0 { "#f7f8fa" } else { "#ffffff" };
        let _ = write!(
            o,
            "<rect x=\"{LEFT}\" y=\"{:.1}\" width=\"{WIDTH}\" height=\"{LANE}\" fill=\"{fill}\"/><text x=\"{:.0}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            y(k),
            LEFT - 8.0,
            y(k) + 15.0,
            esc(name)
        );
    }
    // Time axis.
    let seconds = span / 1e9;
    let step = [1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0]
        .into_iter()
        .find(|s| seconds / s <= 12.0)
        .unwrap_or(1200.0);
    let mut s = 0.0;
    while s <= seconds {
        let xs = LEFT + s / seconds * WIDTH;
        let _ = write!(
            o,
            "<line x1=\"{xs:.1}\" x2=\"{xs:.1}\" y1=\"{:.0}\" y2=\"{height:.0}\" stroke=\"#e1e5ec\"/><text x=\"{xs:.1}\" y=\"14\" text-anchor=\"middle\" fill=\"#5b6472\">{s:.0} s</text>",
            top - 4.0
        );
        s += step;
    }
    // Fault windows, shaded across every lane.
    // id -> (fault, target, requested, verified, healed, detail)
    type Window = (String, String, Option<u64>, Option<u64>, Option<u64>, String);
    let mut windows: BTreeMap<u64, Window> = BTreeMap::new();
    for l in h {
        if let HistoryLine::Fault(f) = l {
            let w = windows
                .entry(f.id)
                .or_insert_with(|| (f.fault.to_string(), f.target.clone(), None, None, None, String::new()));
            match f.phase {
                FaultPhase::Requested => w.2 = Some(f.at_ns),
                FaultPhase::Verified => {
                    w.3 = Some(f.at_ns);
                    w.5.clone_from(&f.detail);
                }
                FaultPhase::Failed => w.5 = format!("NOT VERIFIED: {}", f.detail),
                FaultPhase::Healed => w.4 = Some(f.at_ns),
                FaultPhase::HealFailed => w.5 = format!("NOT HEALED: {}", f.detail),
            }
        }
    }
    for (id, (fault, target, requested, verified, healed, detail)) in &windows {
        let Some(from) = requested.or(*verified) else { continue };
        let to = healed.unwrap_or(end);
        let (x1, x2) = (x(from), x(to).max(x(from) + 2.0));
        let effect = verified
            .map(|v| format!(" (in effect after {:.1} ms)", v.saturating_sub(from) as f64 / 1e6))
            .unwrap_or_default();
        let _ = write!(
            o,
            "<g><title>fault #{id} {} on {}{effect}: {}</title><rect x=\"{x1:.1}\" y=\"{top}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{FAULT}\" fill-opacity=\"0.08\" stroke=\"{FAULT}\" stroke-opacity=\"0.35\" stroke-dasharray=\"3 2\"/><text x=\"{:.1}\" y=\"{:.1}\" fill=\"#8e1c1c\">#{id} {} {}</text></g>",
            esc(fault),
            esc(target),
            esc(detail),
            x2 - x1,
            lanes.len() as f64 * LANE,
            x1 + 3.0,
            y(0) + 15.0,
            esc(fault),
            esc(target)
        );
    }
    // Redis lanes: who holds the key, from the observer, merged into segments.
    let owners = token_owners(h);
    for (k, inst) in instances.iter().enumerate() {
        let lane = 1 + k;
        o.push_str("<g fill-opacity=\"0.75\">");
        let mut seg: Option<(u64, Option<String>, bool)> = None; // start, holder, error
        let mut last_role: Option<String> = None;
        let draw = |o: &mut String, from: u64, to: u64, holder: &Option<String>, error: bool| {
            let (x1, x2) = (x(from), x(to));
            if x2 - x1 < 0.5 {
                return;
            }
            let (fill, what) = match (holder, error) {
                (_, true) => (UNREACHABLE, "unreachable".to_owned()),
                (Some(t), _) => {
                    (node_colour(token_node(&owners, t)), format!("held by {} ({t})", token_node(&owners, t)))
                }
                (None, _) => return,
            };
            // The lane names the instance; the group sets the opacity.
            let _ = write!(
                o,
                "<rect x=\"{x1:.1}\" y=\"{:.0}\" width=\"{:.1}\" height=\"{:.0}\" fill=\"{fill}\"><title>{:.2}-{:.2} s: {}</title></rect>",
                y(lane) + 5.0,
                x2 - x1,
                LANE - 10.0,
                from.saturating_sub(t0) as f64 / 1e9,
                to.saturating_sub(t0) as f64 / 1e9,
                esc(&what)
            );
            // The holder named where there is room: colour is never the only clue.
            if let (Some(t), false, true) = (holder, error, x2 - x1 >= 24.0) {
                let _ = write!(
                    o,
                    "<text x=\"{:.1}\" y=\"{:.1}\" fill=\"#fff\" font-weight=\"700\">{}</text>",
                    x1 + 3.0,
                    y(lane) + 15.0,
                    esc(token_node(&owners, t))
                );
            }
        };
        for l in h {
            let HistoryLine::Observer(sample) = l else { continue };
            if sample.instance != *inst {
                continue;
            }
            let error = sample.error.is_some();
            match &seg {
                Some((start, holder, err)) if *holder == sample.holder && *err == error => {
                    let _ = start;
                }
                Some((start, holder, err)) => {
                    draw(o, *start, sample.at_ns, holder, *err);
                    seg = Some((sample.at_ns, sample.holder.clone(), error));
                }
                None => seg = Some((sample.at_ns, sample.holder.clone(), error)),
            }
            if sample.role.is_some() && sample.role != last_role {
                if last_role.is_some() {
                    let xr = x(sample.at_ns);
                    let _ = write!(
                        o,
                        "<path d=\"M{xr:.1} {:.1} l4 6 l-4 6 l-4 -6 z\" fill=\"#1d2330\"><title>{} became {} at {:.2} s</title></path>",
                        y(lane) + 5.0,
                        esc(inst),
                        esc(sample.role.as_deref().unwrap_or("")),
                        sample.at_ns.saturating_sub(t0) as f64 / 1e9
                    );
                }
                last_role.clone_from(&sample.role);
            }
        }
        if let Some((start, holder, err)) = &seg {
            draw(o, *start, end, holder, *err);
        }
        o.push_str("</g>");
    }
    if let Some(lane) = env_lane {
        environment_marks(o, h, y(lane) + LANE / 2.0, |ns| (x(ns), ns.saturating_sub(t0) as f64 / 1e9));
    }
    // Nodes: believed ownership (acquired until lost or released) and what they did.
    let mut marks = Marks::default();
    let mut open: HashMap<&str, (u64, String)> = HashMap::new();
    let mut intervals: Vec<(usize, u64, u64, String, &str)> = Vec::new();
    let mut violations_marks = Vec::new();
    for l in h {
        match l {
            HistoryLine::Node { node, received_ns, event, .. } => {
                let Some(&lane) = node_lane.get(node.as_str()) else { continue };
                let at = *received_ns;
                let t = at.saturating_sub(t0) as f64 / 1e9;
                match &event.kind {
                    EventKind::Acquired { token, fence, .. } => {
                        if let Some((from, tok)) = open.remove(node.as_str()) {
                            intervals.push((lane, from, at, tok, "released"));
                        }
                        open.insert(node.as_str(), (at, format!("{token} fence {fence}")));
                    }
                    EventKind::OwnershipLost { reason, .. } => {
                        if let Some((from, tok)) = open.remove(node.as_str()) {
                            intervals.push((lane, from, at, tok, "lost"));
                        }
                        marks.add(lane, x(at), "lost", || format!("{node} lost ownership at {t:.2} s: {reason}"));
                    }
                    EventKind::Released { .. } | EventKind::Stopped => {
                        if let Some((from, tok)) = open.remove(node.as_str()) {
                            intervals.push((lane, from, at, tok, "released"));
                        }
                    }
                    EventKind::CheckpointPassed { number, .. } => {
                        marks.add(lane + 1, x(at), "ckpt", || format!("{node} checkpoint {number} passed at {t:.2} s"));
                    }
                    EventKind::CheckpointFailed { number, reason, .. } => {
                        marks.add(lane + 1, x(at), "ckfail", || {
                            format!("{node} checkpoint {number} FAILED at {t:.2} s: {reason}")
                        });
                    }
                    _ => {}
                }
            }
            HistoryLine::Audit(a) => {
                let Some(&lane) = node_lane.get(a.node.as_str()) else { continue };
                if !a.op.is_write() {
                    continue;
                }
                let t = a.mono_ns.saturating_sub(t0) as f64 / 1e9;
                let class = if violating.contains_key(&a.seq) {
                    "violating"
                } else if a.accepted {
                    "accepted"
                } else {
                    "rejected"
                };
                let title = || {
                    format!(
                        "{} {} fence {} seq {} at {t:.2} s: {}{}",
                        a.node,
                        a.op,
                        a.fence,
                        a.seq,
                        class,
                        a.reason.as_deref().map(|r| format!(" ({r})")).unwrap_or_default()
                    )
                };
                marks.add(lane + 1, x(a.mono_ns), class, title);
                if let Some(&v) = violating.get(&a.seq) {
                    violations_marks.push((lane + 1, x(a.mono_ns), title(), v));
                }
            }
            _ => {}
        }
    }
    for (node, (from, tok)) in open {
        intervals.push((node_lane[node], from, end, tok, "held to the end"));
    }
    // Believed ownership, merged when closer than a pixel.
    intervals.sort_by_key(|iv| (iv.0, iv.1));
    let mut merged: Vec<(usize, f64, f64, String, usize)> = Vec::new();
    for (lane, from, to, tok, how) in intervals {
        let (x1, x2) = (x(from), x(to));
        match merged.last_mut() {
            Some(m) if m.0 == lane && x1 - m.2 < 1.0 => {
                m.2 = m.2.max(x2);
                m.4 += 1;
            }
            _ => merged.push((
                lane,
                x1,
                x2,
                format!(
                    "{tok} owner {:.2}-{:.2} s, {how}",
                    from.saturating_sub(t0) as f64 / 1e9,
                    to.saturating_sub(t0) as f64 / 1e9
                ),
                1,
            )),
        }
    }
    // One group per lane (its colour once), one rect per interval with its own title.
    let mut open_lane = None;
    for (lane, x1, x2, title, count) in merged {
        if open_lane != Some(lane) {
            if open_lane.is_some() {
                o.push_str("</g>");
            }
            let node = lanes[lane].split(' ').next().unwrap_or("");
            let _ = write!(o, "<g fill=\"{}\" fill-opacity=\"0.85\">", node_colour(node));
            open_lane = Some(lane);
        }
        let title =
            if count > 1 { format!("{count} ownership intervals merged at this scale; first: {title}") } else { title };
        let _ = write!(
            o,
            "<rect x=\"{x1:.1}\" y=\"{:.0}\" width=\"{:.1}\" height=\"{:.0}\"><title>{}</title></rect>",
            y(lane) + 5.0,
            (x2 - x1).max(1.0),
            LANE - 10.0,
            esc(&title)
        );
    }
    if open_lane.is_some() {
        o.push_str("</g>");
    }
    dense_marks(o, &marks, &lanes, y);
    for ((lane, px, class), (count, title)) in marks.cells.iter().filter(|((_, _, c), _)| !DENSE.contains(c)) {
        let title = if *count > 1 { format!("{count} marks here; first: {title}") } else { title.clone() };
        let yl = y(*lane);
        let shape = match *class {
            "ckpt" => format!("<rect x=\"{px}\" y=\"{:.1}\" width=\"1\" height=\"8\" fill=\"{INK}\">", yl + 2.0),
            "ckfail" => format!("<rect x=\"{}\" y=\"{:.1}\" width=\"3\" height=\"10\" fill=\"{RED}\">", px - 1, yl + 1.0),
            "lost" => format!(
                "<path d=\"M{} {:.1} l8 8 m0 -8 l-8 8\" stroke=\"{RED}\" stroke-width=\"2.2\">",
                px - 4,
                yl + 7.0
            ),
            "accepted" => format!("<rect x=\"{}\" y=\"{:.1}\" width=\"5\" height=\"5\" fill=\"{INK}\">", px - 2, yl + 13.0),
            "rejected" => format!(
                "<rect x=\"{}\" y=\"{:.1}\" width=\"5\" height=\"5\" fill=\"#fff\" stroke=\"{INK}\" stroke-width=\"1.2\">",
                px - 2,
                yl + 13.0
            ),
            _ => format!("<circle cx=\"{px}\" cy=\"{:.1}\" r=\"5\" fill=\"{RED}\" stroke=\"#fff\">", yl + 15.0),
        };
        let close = if shape.starts_with("<circle") {
            "</circle>"
        } else if shape.starts_with("<path") {
            "</path>"
        } else {
            "</rect>"
        };
        let _ = write!(o, "{shape}<title>{}</title>{close}", esc(&title));
    }
    // Violations stand out and link to their evidence.
    for (k, (lane, px, title, v)) in violations_marks.iter().enumerate().take(50) {
        let _ = write!(
            o,
            "<a href=\"#v{i}-{v}\"><circle cx=\"{px:.1}\" cy=\"{:.1}\" r=\"7\" fill=\"none\" stroke=\"{RED}\" stroke-width=\"2\"><title>violation {}: {}</title></circle></a>",
            y(*lane) + 15.0,
            k + 1,
            esc(title)
        );
    }
    o.push_str("</svg></div>");
    o.push_str(
        "<div class=\"legend meta\"><span><i class=\"sw\" style=\"background:#c6282814;border:1px dashed #c62828\"></i>fault window</span><span><i class=\"sw\" style=\"background:#0072b2\"></i>key holder / believed owner (colour per node, named where it fits)</span><span><i class=\"sw\" style=\"background:#d0d5dc\"></i>instance unreachable</span><span>&#9670; role change</span><span><i class=\"sw\" style=\"background:#1d2330;width:1px\"></i>checkpoint</span><span><i class=\"sw\" style=\"background:#1d2330;width:6px;height:6px\"></i>write accepted</span><span><i class=\"sw\" style=\"background:#fff;border:1px solid #1d2330;width:5px;height:5px\"></i>write rejected (fence)</span><span><i class=\"sw\" style=\"background:#d50000;border-radius:5px\"></i>violating write (links to its violation)</span><span><i class=\"sw\" style=\"background:#d50000;width:3px\"></i>check failed</span><span style=\"color:#d50000\">&#10005;</span> loss</div>",
    );
}
