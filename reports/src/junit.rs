//! `junit.xml`: one test suite per scenario run, one test case per property (and one for the
//! run itself when it could not start). A violation is a `<failure>` carrying its text; an
//! expected failure observed passes, saying so; inconclusive is an `<error>`.

use std::fmt::Write;

use crate::suite::{ScenarioRun, Suite};
use crate::{Expectation, PropertyStatus};

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

struct Case {
    name: String,
    failure: Option<(String, String)>,
    error: Option<String>,
    out: Option<String>,
}

fn cases(run: &ScenarioRun) -> Vec<Case> {
    let Some(r) = &run.result else {
        return vec![Case {
            name: "run".into(),
            failure: None,
            error: Some(run.error.clone().unwrap_or_else(|| "the run did not finish".into())),
            out: None,
        }];
    };
    let mut cases = Vec::new();
    for p in &r.properties {
        let expected = run.expected.as_ref().filter(|e| e.property == p.name);
        let mut case = Case { name: p.name.clone(), failure: None, error: None, out: None };
        match (p.status, expected) {
            (PropertyStatus::Violated, Some(e)) => {
                case.out = Some(format!("expected failure observed: {} ({})", p.sentence, e.why));
            }
            (PropertyStatus::Violated, None) => {
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
                case.failure = Some((p.sentence.clone(), text.join("\n")));
            }
            (_, Some(e)) if r.expectation == Some(Expectation::ExpectedFailureMissing) => {
                case.failure = Some((
                    format!("expected {} to be violated, and it held", e.property),
                    format!("the scenario declares this failure on purpose: {}", e.why),
                ));
            }
            (PropertyStatus::Inconclusive, _) => case.error = Some(p.sentence.clone()),
            _ => case.out = Some(p.sentence.clone()),
        }
        cases.push(case);
    }
    if !r.inconclusive.is_empty() {
        cases.push(Case {
            name: "history complete".into(),
            failure: None,
            error: Some(r.inconclusive.join("\n")),
            out: None,
        });
    }
    cases
}

/// Renders the suite as JUnit XML.
#[must_use]
pub fn render(suite: &Suite) -> String {
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let all: Vec<(&ScenarioRun, Vec<Case>)> = suite.scenarios.iter().map(|s| (s, cases(s))).collect();
    let total: usize = all.iter().map(|(_, c)| c.len()).sum();
    let failures: usize = all.iter().map(|(_, c)| c.iter().filter(|c| c.failure.is_some()).count()).sum();
    let errors: usize = all.iter().map(|(_, c)| c.iter().filter(|c| c.error.is_some()).count()).sum();
    let _ = writeln!(
        out,
        "<testsuites name=\"leasequake\" tests=\"{total}\" failures=\"{failures}\" errors=\"{errors}\" time=\"{:.1}\">",
        suite.took_s
    );
    for (run, cases) in &all {
        let _ = writeln!(
            out,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" time=\"{:.1}\">",
            xml(&run.name),
            cases.len(),
            cases.iter().filter(|c| c.failure.is_some()).count(),
            cases.iter().filter(|c| c.error.is_some()).count(),
            run.took_s
        );
        let _ = writeln!(
            out,
            "    <properties><property name=\"seed\" value=\"{}\"/><property name=\"repro\" value=\"{}\"/></properties>",
            run.seed,
            xml(&run.repro)
        );
        for c in cases {
            let _ = write!(out, "    <testcase classname=\"leasequake.{}\" name=\"{}\"", xml(&run.name), xml(&c.name));
            if c.failure.is_none() && c.error.is_none() && c.out.is_none() {
                out.push_str("/>\n");
                continue;
            }
            out.push_str(">\n");
            if let Some((message, text)) = &c.failure {
                let _ = writeln!(
                    out,
                    "      <failure message=\"{}\" type=\"violation\">{}\nrepro: {}</failure>",
                    xml(message),
                    xml(text),
                    xml(&run.repro)
                );
            }
            if let Some(e) = &c.error {
                let _ = writeln!(out, "      <error message=\"inconclusive\" type=\"inconclusive\">{}</error>", xml(e));
            }
            if let Some(o) = &c.out {
                let _ = writeln!(out, "      <system-out>{}</system-out>", xml(o));
            }
            out.push_str("    </testcase>\n");
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}
