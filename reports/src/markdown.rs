//! `summary.md`: the suite as a Markdown table, for CI job summaries.

use std::fmt::Write;

use crate::suite::{ScenarioRun, Shown, Suite};

/// A table cell: one line, markup escaped (a node's `<img>` or code fence shows as written),
/// control and direction characters shown escaped, bounded.
fn cell(text: &str) -> String {
    crate::markdown(text)
}

/// A line inside a code fence: control and direction characters shown escaped, and no fence of
/// its own that would end the block early.
fn fenced(text: &str) -> String {
    crate::escaped(&text.replace(['\n', '\r'], " ")).replace("```", "'''")
}

/// Renders the suite summary.
#[must_use]
pub fn render(suite: &Suite) -> String {
    let mut out = String::new();
    let verdict = format!("{:?}", suite.verdict).to_uppercase();
    let _ = writeln!(out, "## leasequake: {verdict}\n");
    let _ = writeln!(
        out,
        "{} · {} scenario runs · PASS {} · FAIL {} · XFAIL {} · INCONCLUSIVE {} · {:.0} s\n",
        suite.started_utc,
        suite.scenarios.len(),
        suite.count(Shown::Pass),
        suite.count(Shown::Fail),
        suite.count(Shown::ExpectedFail),
        suite.count(Shown::Inconclusive),
        suite.took_s
    );
    if let Some(why) = &suite.stopped {
        let _ = writeln!(out, "**Stopped early:** {}\n", cell(why));
    }
    out.push_str("| scenario | verdict | time | finding |\n| --- | --- | ---: | --- |\n");
    for i in suite.order() {
        let r = &suite.scenarios[i];
        let finding = match r.extension() {
            Some(why) => format!("{} (the run {why})", r.finding()),
            None => r.finding(),
        };
        let _ =
            writeln!(out, "| {} | **{}** | {:.0} s | {} |", cell(&r.name), r.shown().label(), r.took_s, cell(&finding));
    }
    let failed: Vec<&ScenarioRun> = suite
        .order()
        .into_iter()
        .map(|i| &suite.scenarios[i])
        .filter(|r| matches!(r.shown(), Shown::Fail | Shown::Inconclusive))
        .collect();
    if !failed.is_empty() {
        out.push_str("\nReplay exactly (the schedule as executed):\n\n```\n");
        for r in &failed {
            let _ = writeln!(out, "{}", fenced(&r.repro));
        }
        out.push_str("```\n");
        let reruns: Vec<&str> = failed.iter().map(|r| r.rerun.as_str()).filter(|r| !r.is_empty()).collect();
        if !reruns.is_empty() {
            out.push_str("\nOr run the scenario files again (random schedules drawn again):\n\n```\n");
            for r in reruns {
                let _ = writeln!(out, "{}", fenced(r));
            }
            out.push_str("```\n");
        }
    }
    if let Some(c) = &suite.coverage {
        out.push_str("\n### Fault coverage (fault kind x the target's phase when it began)\n\n");
        out.push_str(&c.markdown(&crate::history::FaultKind::ALL));
    }
    let versions: Vec<String> = suite.versions.iter().map(|(k, v)| format!("{k} {v}")).collect();
    let _ = writeln!(out, "\n{}", cell(&versions.join(" · ")));
    out
}
