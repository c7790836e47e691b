//! The self-test's and the report merge's command lines: bad input names the problem and the fix,
//! and merged suites keep every run. (The self-test's detection itself is measured by
//! `leasequake selftest`, which .ci/run runs: docs/detection.md.)

use std::process::Command;

use leasequake_reports::suite::{ScenarioRun, Suite, SUMMARY_SCHEMA};
use leasequake_reports::Verdict;

fn leasequake(args: &[&str], cwd: &std::path::Path) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_leasequake")).args(args).current_dir(cwd).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn checkout() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn selftest_without_the_flawed_node_build_says_how_to_build_it() {
    let (code, _, err) = leasequake(&["selftest", "--flawed-node", "/nonexistent/leasequake"], &checkout());
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("cargo build -p leasequake --features flaws --target-dir target/flawed"), "{err}");
}

#[test]
fn selftest_names_the_catalogue_when_an_entry_is_unknown() {
    let (code, _, err) = leasequake(&["selftest", "--entry", "acquire-without-nz"], &checkout());
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("no catalogue entry \"acquire-without-nz\"") && err.contains("acquire-without-nx"), "{err}");
}

#[test]
fn the_production_build_refuses_to_select_a_flaw() {
    let (code, _, err) = leasequake(&["node", "--flaw", "non-sticky-loss"], &checkout());
    assert_ne!(code, Some(0));
    assert!(err.contains("this build cannot select flaws"), "{err}");
}

#[test]
fn a_bad_shard_is_refused_with_its_form() {
    let (code, _, err) = leasequake(&["run", "scenarios/smoke", "--shard", "3/2"], &checkout());
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("K/N with 1 <= K <= N"), "{err}");
}

fn run(name: &str, dir: &str, error: Option<&str>) -> ScenarioRun {
    ScenarioRun {
        name: name.into(),
        file: format!("scenarios/{name}.toml"),
        description: "d".into(),
        seed: 7,
        dir: dir.into(),
        took_s: 1.0,
        config: Default::default(),
        expected: None,
        result: None,
        error: error.map(str::to_owned),
        repro: format!("leasequake repro reports-out/x/01-{name}"),
        rerun: format!("leasequake run scenarios/{name}.toml --seed 7"),
        extended_ms: None,
    }
}

fn suite_dir(root: &std::path::Path, name: &str, runs: Vec<ScenarioRun>, took_s: f64) -> std::path::PathBuf {
    let dir = root.join(name);
    for r in &runs {
        std::fs::create_dir_all(dir.join(&r.dir).join("logs")).unwrap();
        std::fs::write(dir.join(&r.dir).join("logs/n1.log"), format!("log of {}", r.name)).unwrap();
    }
    let suite = Suite {
        schema: SUMMARY_SCHEMA,
        started_utc: format!("2026-12-02T0{}:00:00Z", runs.len()),
        took_s,
        versions: Default::default(),
        verdict: Verdict::Inconclusive,
        stopped: None,
        scenarios: runs,
        coverage: None,
    };
    std::fs::write(dir.join("summary.json"), serde_json::to_vec(&suite).unwrap()).unwrap();
    dir
}

#[test]
fn report_merge_keeps_every_run_renumbered_with_its_files_and_the_worst_verdict() {
    let root = std::env::temp_dir().join(format!("lq-merge-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let a = suite_dir(&root, "a", vec![run("alpha", "01-alpha", Some("environment broke"))], 100.0);
    let b = suite_dir(&root, "b", vec![run("beta", "01-beta", Some("x")), run("gamma", "02-gamma", Some("y"))], 250.0);
    let out = root.join("merged");
    let (code, stdout, err) = leasequake(
        &["report", "merge", a.to_str().unwrap(), b.to_str().unwrap(), "--report-dir", out.to_str().unwrap()],
        &root,
    );
    assert_eq!(code, Some(3), "{stdout}{err}");
    let merged = out.join("latest");
    let suite: Suite = serde_json::from_slice(&std::fs::read(merged.join("summary.json")).unwrap()).unwrap();
    let dirs: Vec<&str> = suite.scenarios.iter().map(|r| r.dir.as_str()).collect();
    assert_eq!(dirs, ["01-alpha", "02-beta", "03-gamma"]);
    assert_eq!(std::fs::read_to_string(merged.join("03-gamma/logs/n1.log")).unwrap(), "log of gamma");
    assert_eq!(suite.took_s, 250.0);
    assert_eq!(suite.verdict, Verdict::Inconclusive);
    for f in ["junit.xml", "summary.md", "report.html"] {
        assert!(merged.join(f).is_file(), "{f}");
    }
    // Not a suite: named, exit 2.
    let (code, _, err) =
        leasequake(&["report", "merge", root.to_str().unwrap(), "--report-dir", out.to_str().unwrap()], &root);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("is") && err.contains("a suite directory"), "{err}");
    std::fs::remove_dir_all(&root).unwrap();
}

/// A suite holding one real run: the simulation's kept sample seed (a history, its verdicts and
/// scenario), as `leasequake sim` wrote it.
fn simulated_suite(root: &std::path::Path) -> std::path::PathBuf {
    let out = root.join("sim");
    let (code, stdout, err) =
        leasequake(&["sim", "--seeds", "1", "--virtual-s", "10", "--report-dir", out.to_str().unwrap()], &checkout());
    assert_eq!(code, Some(0), "{stdout}{err}");
    std::fs::canonicalize(out.join("latest")).unwrap()
}

fn rewrite_summary(dir: &std::path::Path, change: impl FnOnce(&mut Suite)) {
    let path = dir.join("summary.json");
    let mut suite: Suite = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    change(&mut suite);
    std::fs::write(&path, serde_json::to_vec(&suite).unwrap()).unwrap();
}

#[test]
fn report_merge_judges_every_run_again_from_its_history_and_trusts_no_summary() {
    let root = std::env::temp_dir().join(format!("lq-merge-judged-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let sim = simulated_suite(&root);
    let merge = |suite: &std::path::Path| {
        let out = root.join("merged");
        let (code, stdout, err) =
            leasequake(&["report", "merge", suite.to_str().unwrap(), "--report-dir", out.to_str().unwrap()], &root);
        let merged: Option<Suite> =
            std::fs::read(out.join("latest/summary.json")).ok().map(|b| serde_json::from_slice(&b).unwrap());
        (code, stdout, err, merged)
    };
    // A summary that says FAIL where the history passes: the history's PASS stands, and the
    // disagreement is named.
    rewrite_summary(&sim, |s| {
        s.verdict = Verdict::Fail;
        s.scenarios[0].result.as_mut().unwrap().verdict = Verdict::Fail;
    });
    let (code, stdout, err, merged) = merge(&sim);
    assert_eq!(code, Some(0), "{stdout}{err}");
    assert!(err.contains("summary.json said FAIL, its history judges PASS"), "{err}");
    let merged = merged.unwrap();
    let run = &merged.scenarios[0];
    // The copy holds its history and the verdicts judged now; a seed's replay stays as it was (a
    // container run's `repro RUN_DIR` is pointed at the copy: the unit tests of `moved_repro`).
    let copy = root.join("merged/latest").join(&run.dir);
    assert!(run.repro.contains("sim --seed 1"), "{}", run.repro);
    assert!(copy.join("history.jsonl").is_file() && copy.join("verdicts.json").is_file());
    // A damaged history under a summary that says PASS: inconclusive.
    rewrite_summary(&sim, |s| {
        s.verdict = Verdict::Pass;
        s.scenarios[0].result.as_mut().unwrap().verdict = Verdict::Pass;
    });
    // The copy keeps its run's name, the seed in it, renumbered.
    assert_eq!(run.dir, "01-recommended-seed-1");
    let history = sim.join(&run.dir).join("history.jsonl");
    let text = std::fs::read_to_string(&history).unwrap();
    let second = text.lines().nth(1).unwrap();
    std::fs::write(&history, text.replacen(second, "", 1)).unwrap();
    let (code, stdout, err, _) = merge(&sim);
    assert_eq!(code, Some(3), "{stdout}{err}");
    assert!(err.contains("summary.json said PASS, its history judges INCONCLUSIVE"), "{err}");
    // A summary whose run directory leaves the suite: refused, exit 2, nothing copied.
    rewrite_summary(&sim, |s| s.scenarios[0].dir = "../../etc".into());
    let (code, _, err, _) = merge(&sim);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("is no plain name inside the suite"), "{err}");
    // A verdict with no run directory to judge it by: inconclusive, never the claimed PASS.
    rewrite_summary(&sim, |s| s.scenarios[0].dir = String::new());
    let (code, stdout, err, _) = merge(&sim);
    assert_eq!(code, Some(3), "{stdout}{err}");
    std::fs::remove_dir_all(&root).unwrap();
}
