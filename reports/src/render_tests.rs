//! The renderers on known suites: what a CI and a reader must see, and must not.

use crate::history::{ExpectedFailure, HistoryLine};
use crate::suite::{ScenarioRun, Shown, Suite, SUMMARY_SCHEMA};
use crate::{CheckResult, Evidence, Expectation, Metrics, PropertyResult, PropertyStatus, Verdict, Violation};

/// docs/history.md's worked example: n1 paused after checkpoint 7, its persist (seq 5) lands.
fn example_history() -> Vec<HistoryLine> {
    let doc = include_str!("../../docs/history.md");
    doc.lines().filter(|l| l.starts_with("{\"kind\"")).map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn property(name: &str, status: PropertyStatus, violations: Vec<Violation>) -> PropertyResult {
    PropertyResult {
        name: name.into(),
        status,
        sentence: format!("{name} sentence <with markup>"),
        violation_count: violations.len() as u64,
        violations,
    }
}

fn stale_write() -> Violation {
    Violation {
        summary: "n1 wrote persist_record under fence 1 (seq 5) after n2 had written under fence 2 (seq 1)".into(),
        evidence: vec![Evidence {
            label: "stale write".into(),
            seq: Some(5),
            node: "n1".into(),
            token: "n1/1/0/aa".into(),
            fence: 1,
            what: "persist_record".into(),
            at_ns: 3_010_000_000,
        }],
        faults_active: vec!["#1 pause_node on n1".into()],
        at_ns: 3_010_000_000,
    }
}

fn run(name: &str, verdict: Verdict, props: Vec<PropertyResult>, expected: Option<&str>) -> ScenarioRun {
    let expectation = expected.map(|_| {
        if props.iter().any(|p| p.status == PropertyStatus::Violated) {
            Expectation::ExpectedFailureObserved
        } else {
            Expectation::ExpectedFailureMissing
        }
    });
    ScenarioRun {
        name: name.into(),
        file: format!("scenarios/x/{name}.toml"),
        description: "a <script>alert(1)</script> description".into(),
        seed: 7,
        dir: format!("01-{name}"),
        took_s: 12.0,
        config: Default::default(),
        expected: expected.map(|p| ExpectedFailure { property: p.into(), why: "no fencing".into(), also: vec![] }),
        result: Some(CheckResult {
            verdict,
            expectation,
            properties: props,
            inconclusive: if verdict == Verdict::Inconclusive { vec!["an observer gap of 9 s".into()] } else { vec![] },
            notes: vec![],
            metrics: Metrics::default(),
        }),
        error: None,
        repro: format!("leasequake repro reports-out/x/01-{name}"),
        rerun: format!("leasequake run scenarios/x/{name}.toml --seed 7"),
        extended_ms: None,
    }
}

fn suite() -> Suite {
    let held = |n: &str| property(n, PropertyStatus::Held, vec![]);
    Suite {
        schema: SUMMARY_SCHEMA,
        started_utc: "2026-12-03T02:00:00Z".into(),
        took_s: 60.0,
        versions: [("redis".to_owned(), "7.0.15".to_owned())].into(),
        verdict: Verdict::Fail,
        stopped: None,
        scenarios: vec![
            run(
                "calm",
                Verdict::Pass,
                vec![held("no_stale_write"), property("alias_monotonic", PropertyStatus::NotApplicable, vec![])],
                None,
            ),
            run(
                "stale",
                Verdict::Fail,
                vec![property("no_stale_write", PropertyStatus::Violated, vec![stale_write()])],
                None,
            ),
            run(
                "seed-config",
                Verdict::Pass,
                vec![property("no_stale_write", PropertyStatus::Violated, vec![stale_write()])],
                Some("no_stale_write"),
            ),
            run("holey", Verdict::Inconclusive, vec![held("no_stale_write")], None),
            run("missing", Verdict::Fail, vec![held("no_stale_write")], Some("no_stale_write")),
        ],
        coverage: None,
    }
}

#[test]
fn runs_are_shown_by_what_happened_failures_first() {
    let s = suite();
    let shown: Vec<Shown> = s.order().into_iter().map(|i| s.scenarios[i].shown()).collect();
    assert_eq!(shown, [Shown::Fail, Shown::Fail, Shown::Inconclusive, Shown::ExpectedFail, Shown::Pass]);
    assert!(s.scenarios[4].finding().contains("expected no_stale_write to be violated, and it held"));
    assert!(s.scenarios[2].finding().ends_with("(expected)"));
}

#[test]
fn junit_fails_violations_skips_expected_failures_and_the_inapplicable_and_errors_on_holes() {
    let x = crate::junit::render(&suite());
    let head =
        "<testsuites name=\"leasequake\" tests=\"11\" failures=\"2\" errors=\"1\" skipped=\"2\" time=\"60.000\">";
    assert!(x.starts_with("<?xml") && x.contains(head), "{x}");
    let case = |name: &str| {
        let at = x.find(&format!("<testsuite name=\"{name}\"")).unwrap();
        x[at..].split("</testsuite>").next().unwrap().to_owned()
    };
    assert!(case("stale").contains("<failure message=\"no_stale_write sentence &lt;with markup&gt;\""));
    assert!(
        case("stale").contains("after n2 had written under fence 2 (seq 1) [faults in effect: #1 pause_node on n1]")
    );
    let failure = case("stale");
    let (repro, rerun) = (
        failure.find("repro: leasequake repro reports-out/x/01-stale").unwrap(),
        failure.find("or: leasequake run scenarios/x/stale.toml --seed 7").unwrap(),
    );
    assert!(repro < rerun, "the exact replay first: {failure}");
    assert!(case("stale").contains("name=\"run\" time=\"12.000\""), "the run's wall time on its case");
    assert!(case("stale").contains("name=\"no_stale_write\" time=\"0.000\""));
    assert!(!case("seed-config").contains("<failure"));
    assert!(case("seed-config").contains("<skipped message=\"expected failure observed: no_stale_write"));
    assert!(case("calm").contains("<skipped message=\"not applicable: alias_monotonic sentence"));
    assert!(case("missing").contains("<failure message=\"expected no_stale_write to be violated, and it held\""));
    assert!(case("holey").contains("<error message=\"inconclusive: ") && case("holey").contains("observer gap"));
    let message = case("holey").split("message=\"").nth(1).unwrap().split('"').next().unwrap().to_owned();
    assert!(message.contains("observer gap"), "the reason is in the message a CI page shows: {message}");
    assert!(!case("calm").contains("<failure") && !case("calm").contains("<error"));
    assert_eq!(x.matches("<testcase ").count(), 11);
    assert_eq!(x.matches("<testcase ").count(), x.matches("</testcase>").count());
}

#[test]
fn the_markdown_summary_leads_with_failures_and_lists_their_repro_commands() {
    let md = crate::markdown::render(&suite());
    assert!(md.starts_with("## leasequake: FAIL"), "{md}");
    let stale = md.find("| stale |").unwrap();
    let calm = md.find("| calm |").unwrap();
    assert!(stale < calm, "failures first");
    let (repro, rerun) = (
        md.find("leasequake repro reports-out/x/01-holey").unwrap(),
        md.find("leasequake run scenarios/x/holey.toml --seed 7").unwrap(),
    );
    assert!(repro < rerun, "the exact replay first: {md}");
    assert!(!md.contains("01-calm") && !md.contains("scenarios/x/calm.toml"), "no repro for a pass");
}

#[test]
fn a_run_that_went_past_its_duration_says_why_in_both_reports() {
    let mut s = suite();
    s.scenarios[0].extended_ms = Some(2350);
    let why = "went on 2.4 s past its duration_s: the last fault healed late";
    let md = crate::markdown::render(&s);
    assert!(md.contains(why), "{md}");
    assert_eq!(md.matches("past its duration_s").count(), 1, "only the extended run: {md}");
    let page = crate::html::render(&s, &[None, None, None, None, None]);
    assert!(page.contains(why));
    assert_eq!(page.matches("past its duration_s").count(), 1);
}

#[test]
fn the_page_draws_the_violation_quotes_its_history_and_escapes_everything() {
    let s = suite();
    let h = example_history();
    let histories = vec![Some(h.clone()), Some(h.clone()), Some(h), None, None];
    let page = crate::html::render(&s, &histories);
    assert!(page.starts_with("<!doctype html>") && page.ends_with("</html>\n"));
    assert!(!page.contains("<script"), "no script, and the description's is escaped");
    assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    for forbidden in ["src=\"http", "href=\"http", "@import", "url("] {
        assert!(!page.contains(forbidden), "nothing loads from a network: {forbidden}");
    }
    // The stale write is a violating mark on n1's lane, linked to its evidence, which quotes the
    // history line of seq 5.
    assert!(page.contains("violation 1: n1 persist_record fence 1 seq 5"), "violating mark");
    assert!(page.contains("id=\"v1-0\""), "the evidence block of the failing scenario");
    assert!(page.contains("&quot;seq&quot;:5"), "the history line is quoted");
    assert!(page.contains("fault #1 pause on n1 (in effect after 1.0 ms)"), "the fault window is labelled");
    assert!(page.contains("held by n1 (n1/1/0/aa)"), "the Redis lane shows the holder and its token");
    assert!(page.contains("No history to draw."));
}

#[test]
fn a_long_history_is_aggregated_so_the_page_stays_light() {
    let mut h = example_history();
    let template = h.iter().find(|l| matches!(l, HistoryLine::Audit(_))).unwrap().clone();
    let end = h.pop().unwrap(); // the snapshot
    for k in 0..200_000u64 {
        let mut line = template.clone();
        if let HistoryLine::Audit(a) = &mut line {
            a.seq = 100 + k;
            a.mono_ns = 1_000_000_000 + k * 15_000;
            a.accepted = k % 7 != 0;
        }
        h.push(line);
    }
    h.push(end);
    let s = suite();
    let page = crate::html::render(&s, &[None, Some(h), None, None, None]);
    // 221 kB on 2026-12-06 (1.4 MB before the plentiful marks shared a path per lane).
    assert!(page.len() < 400_000, "{} bytes for 200 000 writes", page.len());
    assert!(page.contains(" marks here; first: "), "marks were merged per pixel");
}

#[test]
fn the_tally_counts_each_scenario_and_explains_every_run_that_did_not_pass() {
    let mut suite = suite();
    suite.scenarios.push(run("calm", Verdict::Pass, vec![], None));
    let tally = suite.tally();
    let first = tally.lines().next().unwrap();
    assert!(first.starts_with("  calm") && first.contains("PASS   2"), "{tally}");
    for r in suite.scenarios.iter().filter(|r| r.shown() != crate::suite::Shown::Pass) {
        assert!(tally.contains(&format!("seed {}", r.seed)), "{tally}");
        assert!(tally.contains(r.shown().label()), "{tally}");
    }
    assert!(!tally.contains('\u{1b}'));
    // The last line adds them up.
    let last = tally.lines().last().unwrap();
    let n = |s| suite.count(s);
    use crate::suite::Shown;
    let total = format!(
        "PASS {:>3}  FAIL {:>3}  XFAIL {:>3}  INCONCLUSIVE {:>3}",
        n(Shown::Pass),
        n(Shown::Fail),
        n(Shown::ExpectedFail),
        n(Shown::Inconclusive)
    );
    assert!(last.contains(&format!("all {} runs", suite.scenarios.len())) && last.ends_with(&total), "{tally}");
}

#[test]
fn the_environment_lane_shows_what_changed_and_who_saw_it_only_when_something_did() {
    let s = suite();
    let quiet = example_history();
    let page = crate::html::render(&s, &[Some(quiet.clone()), None, None, None, None]);
    assert!(!page.contains(">environment</text>"), "no lane without events");
    let mut h = quiet;
    let at = match &h[1] {
        HistoryLine::Node { received_ns, .. } => *received_ns,
        _ => 0,
    };
    h.insert(
        2,
        HistoryLine::Environment(crate::history::EnvEvent {
            change: crate::history::EnvChange::ContainerDied,
            subject: "sentinel-3".into(),
            source: "docker".into(),
            at_ns: at,
            detail: "the container stopped <exit code 137>".into(),
        }),
    );
    let page = crate::html::render(&s, &[Some(h), None, None, None, None]);
    assert!(page.contains(">environment</text>"), "the lane");
    assert!(page.contains("docker saw sentinel-3: the container stopped &lt;exit code 137&gt;"), "the mark's title");
}

#[test]
fn the_coverage_table_shows_every_kind_and_phase_and_what_fell_where() {
    let mut s = suite();
    let mut c = crate::coverage::Coverage::default();
    c.cells.insert("pause/embed/owner".into(), 3);
    c.cells.insert("pause/embed/other".into(), 1);
    s.coverage = Some(c);
    let md = crate::markdown::render(&s);
    assert!(md.contains("| pause | - | - | 3/1 | - |"), "{md}");
    assert!(md.contains("| lose_replies | - | - | - |"), "every kind is a row: {md}");
    let page = crate::html::render(&s, &[]);
    assert!(page.contains("id=\"coverage\"") && page.contains("<td class=\"num\">3/1</td>"));
    s.coverage = None;
    assert!(!crate::markdown::render(&s).contains("Fault coverage"));
}

#[test]
fn node_colours_never_look_like_an_outcome_colour() {
    use crate::html::{FAULT, INK, PALETTE, RED, UNREACHABLE};
    let rgb = |h: &str| [1, 3, 5].map(|i| f64::from(u8::from_str_radix(&h[i..i + 2], 16).unwrap()));
    let distance = |a: &str, b: &str| rgb(a).iter().zip(rgb(b)).map(|(x, y)| (x - y).powi(2)).sum::<f64>().sqrt();
    for node in PALETTE {
        for outcome in [INK, RED, FAULT, UNREACHABLE] {
            assert!(distance(node, outcome) >= 100.0, "node colour {node} is too close to outcome colour {outcome}");
        }
    }
    // The page draws writes in outcome colours only, told apart by shape.
    let page = crate::html::render(&suite(), &[Some(example_history()), None, None, None, None]);
    let write_marks: Vec<&str> = page
        .split("<path ")
        .chain(page.split("<rect "))
        .map(|r| r.split('>').next().unwrap_or(""))
        .filter(|r| r.contains("h5v5h-5z") || r.contains("width=\"5\" height=\"5\""))
        .collect();
    assert!(!write_marks.is_empty(), "the example's writes are drawn");
    for node in PALETTE {
        assert!(!write_marks.iter().any(|m| m.contains(node)), "a write mark in node colour {node}");
    }
    assert!(write_marks.iter().any(|m| m.ends_with(&format!("fill=\"{INK}\""))), "an accepted write is an ink square");
}

#[test]
fn every_violation_mark_links_to_its_own_violation() {
    let mut s = suite();
    let mut second = stale_write();
    second.summary = "n2 wrote create_collection twice (seq 1)".into();
    second.evidence[0].seq = Some(1);
    second.evidence[0].node = "n2".into();
    s.scenarios[1].result.as_mut().unwrap().properties.push(property(
        "fence_anomaly",
        PropertyStatus::Violated,
        vec![second],
    ));
    let page = crate::html::render(&s, &[None, Some(example_history()), None, None, None]);
    let link = |v: &str, seq: u64| {
        let at = page.find(&format!("<a href=\"#v1-{v}\">")).unwrap_or_else(|| panic!("no link to v1-{v}"));
        page[at..].split("</a>").next().unwrap().contains(&format!(" seq {seq} at "))
    };
    assert!(link("0", 5) && link("1", 1), "mark of seq 5 -> violation 0, of seq 1 -> violation 1");
    assert!(page.contains("id=\"v1-0\"") && page.contains("id=\"v1-1\""));
}

#[test]
fn the_page_scales_to_its_width_names_ops_as_the_history_does_and_wraps_long_lines() {
    let page = crate::html::render(&suite(), &[Some(example_history()), Some(example_history()), None, None, None]);
    assert!(
        page.contains("<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 1170 "),
        "a viewBox, no fixed width"
    );
    assert!(!page.contains("<svg xmlns=\"http://www.w3.org/2000/svg\" width="));
    assert!(page.contains(".tl svg{display:block;width:100%"));
    assert!(page.contains("white-space:pre-wrap;overflow-wrap:anywhere"), "excerpts wrap, never cut");
    for rust_name in ["PersistRecord", "CreateCollection", "SwitchAlias", "BeginEpoch", "DropCollection", "Upsert "] {
        assert!(!page.contains(rust_name), "the page says {rust_name}, the history does not");
    }
    assert!(page.contains("n1 persist_record fence 1 seq 5"), "the violating write's title");
    for op in crate::history::StoreOp::ALL {
        assert_eq!(serde_json::to_value(op).unwrap(), op.name(), "{op:?} is named as the history names it");
    }
}

#[test]
fn a_findings_markup_and_direction_characters_reach_summary_md_escaped() {
    let mut s = suite();
    s.scenarios[0].name = "evil\u{202e}gnp".into();
    let md = crate::markdown::render(&s);
    // Escaped for the terminal (`\u{202e}`), its backslash escaped for Markdown: it renders as `\u{202e}`.
    assert!(!md.contains('\u{202e}') && md.contains("evil\\\\u{202e}gnp"), "{md}");
    assert!(md.contains("&lt;with markup&gt;") && !md.contains("<with markup>"), "{md}");
}
