//! `leasequake run` end to end on real containers: a pass, a failure (an expected failure that
//! does not happen) and an inconclusive run (a fault that cannot be applied), each with its code.

use std::process::Command;

const BASE: &str = r#"description = "test"
incident = "A scenario written by the runner's integration test, short on purpose."
duration_s = 9

[nodes]
count = 2

[lease]
ttl_ms = 1000

[pipeline]
embed_ms = 50

[store]
policy = "enforce"
fence_source = "store"
"#;

/// Writes and runs a scenario: `top` goes before the tables (top-level keys), `tail` after them.
fn run(name: &str, top: &str, tail: &str) -> (Option<i32>, String, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("leasequake-runner-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("{name}.toml"));
    std::fs::write(&file, format!("name = \"{name}\"\n{top}{BASE}{tail}")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_leasequake"))
        .arg("run")
        .arg(&file)
        .arg("--report-dir")
        .arg(dir.join("reports"))
        .output()
        .unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned(), dir)
}

#[test]
fn a_clean_run_passes_with_exit_0_and_leaves_a_history_and_verdicts() {
    let (code, out, dir) = run("clean", "", "");
    assert_eq!(code, Some(0), "{out}");
    assert!(out.starts_with("PASS"), "{out}");
    let run_dir = std::fs::read_dir(dir.join("reports")).unwrap().next().unwrap().unwrap().path();
    assert!(run_dir.join("history.jsonl").is_file() && run_dir.join("verdicts.json").is_file());
    let verdicts: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run_dir.join("verdicts.json")).unwrap()).unwrap();
    let syncs: u64 =
        verdicts["metrics"]["nodes"].as_object().unwrap().values().map(|n| n["syncs"].as_u64().unwrap()).sum();
    assert!(syncs > 0, "a pass with no sync would prove nothing");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_missing_expected_failure_fails_with_exit_1_and_a_repro_line() {
    let (code, out, dir) =
        run("expects-stale", "expected = { property = \"no_stale_write\", why = \"shown on purpose\" }\n", "");
    assert_eq!(code, Some(1), "{out}");
    assert!(out.starts_with("FAIL") && out.contains("repro: leasequake run"), "{out}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_fault_that_cannot_be_applied_makes_the_run_inconclusive_with_exit_3() {
    let fault = "\n[[faults]]\nkind = \"slow_model\"\ntarget = \"n1\"\nlatency_ms = 100\nat_s = 1\nduration_s = 1\n";
    let (code, out, dir) = run("unsupported", "", fault);
    assert_eq!(code, Some(3), "{out}");
    assert!(out.starts_with("INCONCLUSIVE") && out.contains("not supported"), "{out}");
    std::fs::remove_dir_all(dir).unwrap();
}
