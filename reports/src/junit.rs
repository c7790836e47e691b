//! `junit.xml`: one test suite per scenario run: a `run` case (its wall time; an `<error>` when
//! the run could not finish or its history has a hole) and one case per property. A violation is
//! a `<failure>` carrying its text and the exact replay first; an expected failure observed and a
//! property with nothing to judge are `<skipped>` with the reason; inconclusive is an `<error>`.

use std::fmt::Write;

use crate::suite::{ScenarioRun, Suite};
use crate::{Expectation, PropertyStatus};

/// The most characters of an inconclusive run's first reason put in its case's `message`.
const MESSAGE_MAX: usize = 200;

/// Escapes text for XML attributes and content.
#[must_use]
pub fn xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if (c as u32) < 0x20 && !matches!(c, '\n' | '\t' | '\r') => {}
            c => out.push(c),
        }
    }
    out
}

/// How a test case ended.
enum Outcome {
    Passed(String),
    /// A violation: message and text.
    Failed(String, String),
    /// Inconclusive: the reason.
    Error(String),
    /// An expected failure observed, or a property with nothing to judge: the reason.
    Skipped(String),
}

struct Case {
    name: String,
    /// Seconds: the run's wall time on its `run` case; a property is judged from the recorded
    /// history afterwards (`leasequake bench` times the checker).
    time: f64,
    outcome: Outcome,
}

/// The `run` case (the environment, the nodes, the faults, a complete history) and one case per
/// property.
fn cases(run: &ScenarioRun) -> Vec<Case> {
    let Some(r) = &run.result else {
        let why = run.error.clone().unwrap_or_else(|| "the run did not finish".into());
        return vec![Case { name: "run".into(), time: run.took_s, outcome: Outcome::Error(why) }];
    };
    let ran = if r.inconclusive.is_empty() {
        Outcome::Passed(format!("ran for {:.1} s; the history is complete", run.took_s))
    } else {
        Outcome::Error(r.inconclusive.join("\n"))
    };
    let mut cases = vec![Case { name: "run".into(), time: run.took_s, outcome: ran }];
    for p in &r.properties {
        let expected = run.expected.as_ref().filter(|e| e.property == p.name);
        let outcome = match (p.status, expected) {
            (PropertyStatus::Violated, Some(e)) => {
                Outcome::Skipped(format!("expected failure observed: {} ({})", p.sentence, e.why))
            }
            (PropertyStatus::Violated, None) => Outcome::Failed(p.sentence.clone(), violations(p)),
            (_, Some(e)) if r.expectation == Some(Expectation::ExpectedFailureMissing) => Outcome::Failed(
                format!("expected {} to be violated, and it held", e.property),
                format!("the scenario declares this failure on purpose: {}", e.why),
            ),
            (PropertyStatus::Inconclusive, _) => Outcome::Error(p.sentence.clone()),
            (PropertyStatus::NotApplicable, _) => Outcome::Skipped(format!("not applicable: {}", p.sentence)),
            (PropertyStatus::Held, _) => Outcome::Passed(p.sentence.clone()),
        };
        cases.push(Case { name: p.name.clone(), time: 0.0, outcome });
    }
    cases
}

/// A violated property's violations, one per line, with the faults in effect.
fn violations(p: &crate::PropertyResult) -> String {
    let text: Vec<String> = p
        .violations
        .iter()
        .map(|v| {
            let faults = if v.faults_active.is_empty() {
                String::new()
            } else {
                format!(" [faults in effect: {}]", v.faults_active.join(", "))
            };
            format!("{}{faults}", v.summary)
        })
        .collect();
    text.join("\n")
}

/// Failures, errors and skipped cases.
fn tally(cases: &[Case]) -> [usize; 3] {
    let mut t = [0; 3];
    for c in cases {
        match c.outcome {
            Outcome::Failed(..) => t[0] += 1,
            Outcome::Error(_) => t[1] += 1,
            Outcome::Skipped(_) => t[2] += 1,
            Outcome::Passed(_) => {}
        }
    }
    t
}

/// Renders the suite as JUnit XML.
#[must_use]
pub fn render(suite: &Suite) -> String {
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let all: Vec<(&ScenarioRun, Vec<Case>)> = suite.scenarios.iter().map(|s| (s, cases(s))).collect();
    let total: usize = all.iter().map(|(_, c)| c.len()).sum();
    let [f, e, s] = all.iter().map(|(_, c)| tally(c)).fold([0; 3], |a, t| [a[0] + t[0], a[1] + t[1], a[2] + t[2]]);
    let _ = writeln!(
        out,
        "<testsuites name=\"leasequake\" tests=\"{total}\" failures=\"{f}\" errors=\"{e}\" skipped=\"{s}\" time=\"{:.3}\">",
        suite.took_s
    );
    for (run, cases) in &all {
        let [f, e, s] = tally(cases);
        let _ = writeln!(
            out,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{f}\" errors=\"{e}\" skipped=\"{s}\" time=\"{:.3}\">",
            xml(&run.name),
            cases.len(),
            run.took_s
        );
        let _ = write!(out, "    <properties><property name=\"seed\" value=\"{}\"/>", run.seed);
        let _ = write!(out, "<property name=\"repro\" value=\"{}\"/>", xml(&run.repro));
        if !run.rerun.is_empty() {
            let _ = write!(out, "<property name=\"rerun\" value=\"{}\"/>", xml(&run.rerun));
        }
        out.push_str("</properties>\n");
        for c in cases {
            case(&mut out, run, c);
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

/// One `<testcase>`.
fn case(out: &mut String, run: &ScenarioRun, c: &Case) {
    let _ = writeln!(
        out,
        "    <testcase classname=\"leasequake.{}\" name=\"{}\" time=\"{:.3}\">",
        xml(&run.name),
        xml(&c.name),
        c.time
    );
    match &c.outcome {
        Outcome::Failed(message, text) => {
            let rerun = if run.rerun.is_empty() { String::new() } else { format!("\nor: {}", run.rerun) };
            let _ = writeln!(
                out,
                "      <failure message=\"{}\" type=\"violation\">{}\nrepro: {}{}</failure>",
                xml(message),
                xml(text),
                xml(&run.repro),
                xml(&rerun)
            );
        }
        Outcome::Error(e) => {
            // The reason in `message`, which a CI page shows without opening the case.
            let first: String = e.lines().next().unwrap_or("").chars().take(MESSAGE_MAX).collect();
            let _ = writeln!(
                out,
                "      <error message=\"inconclusive: {}\" type=\"inconclusive\">{}\nrepro: {}</error>",
                xml(&first),
                xml(e),
                xml(&run.repro)
            );
        }
        Outcome::Skipped(why) => {
            let _ = writeln!(out, "      <skipped message=\"{}\"/>", xml(why));
        }
        Outcome::Passed(text) => {
            let _ = writeln!(out, "      <system-out>{}</system-out>", xml(text));
        }
    }
    out.push_str("    </testcase>\n");
}
