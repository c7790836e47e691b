//! `leasequake check DIR` on docs/history.md's example, as a person would run it.

use std::process::Command;

fn example() -> String {
    let doc = include_str!("../../../docs/history.md");
    doc.split("```jsonl\n").nth(1).unwrap().split("```").next().unwrap().to_owned()
}

fn run_check(history: &str) -> (i32, String, serde_json::Value) {
    // One directory per call: tests run in parallel, and two histories can have one length.
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("leasequake-check-{}-{call}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("history.jsonl"), history).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_leasequake")).arg("check").arg(&dir).output().unwrap();
    let verdicts = serde_json::from_slice(&std::fs::read(dir.join("verdicts.json")).unwrap()).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned(), verdicts)
}

#[test]
fn the_doc_example_fails_on_its_stale_write_and_says_so() {
    let (code, stdout, verdicts) = run_check(&example());
    assert_eq!(code, 1, "{stdout}");
    assert!(stdout.lines().any(|l| l.split_whitespace().take(2).eq(["no_stale_write", "violated"])), "{stdout}");
    assert!(stdout.contains("verdict: FAIL"), "{stdout}");
    assert_eq!(verdicts["verdict"], "fail");
    let v = &verdicts["properties"][0]["violations"][0];
    assert_eq!((v["evidence"][0]["seq"].as_u64(), v["evidence"][1]["seq"].as_u64()), (Some(1), Some(5)));
}

#[test]
fn the_doc_example_passes_as_a_declared_expected_failure_and_when_fenced() {
    let expected =
        example().replace(r#""expected":null"#, r#""expected":{"property":"no_stale_write","why":"no fencing"}"#);
    let (code, stdout, _) = run_check(&expected);
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.contains("expectation: expected_failure_observed"), "{stdout}");
    let fenced = example().replace(
        r#""fence":1,"op":"persist_record","collection":"c1","accepted":true,"reason":null"#,
        r#""fence":1,"op":"persist_record","collection":"c1","accepted":false,"reason":"stale fence 1 < newest 2""#,
    );
    let (code, stdout, verdicts) = run_check(&fenced);
    assert_eq!(code, 0, "{stdout}");
    assert_eq!(verdicts["metrics"]["fenced_rejections"], 1);
}

#[test]
fn an_unreadable_history_line_makes_the_run_inconclusive() {
    let healed = r#"{"kind":"fault","id":1,"fault":"pause","target":"n1","phase":"healed""#;
    assert!(example().contains(healed));
    // A field of the wrong type, and a fault kind this version does not know.
    for damaged in [healed.replace(r#""id":1"#, r#""id":"one""#), healed.replace(r#""pause""#, r#""pause_node""#)] {
        let broken = example().replace(healed, &damaged);
        let fenced = broken.replace(r#""collection":"c1","accepted":true"#, r#""collection":"c1","accepted":false"#);
        let (code, stdout, _) = run_check(&fenced);
        assert_eq!(code, 3, "{damaged}: {stdout}");
        assert!(stdout.contains("unreadable history line"), "{stdout}");
    }
}

#[test]
fn a_sealed_history_keeps_its_verdict_through_crlf_and_loses_it_to_an_edit() {
    use leasequake_reports::history::HistoryLine;
    // The example as the runner would write it today: version 3, sealed.
    let mut lines: Vec<HistoryLine> = example().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    if let HistoryLine::Header(h) = &mut lines[0] {
        h.version = 3;
    }
    leasequake::history::seal(&mut lines);
    let text: String = lines.iter().map(|l| serde_json::to_string(l).unwrap() + "\n").collect();
    let (code, stdout, _) = run_check(&text);
    assert_eq!(code, 1, "{stdout}");
    assert!(!stdout.contains("note:"), "{stdout}");
    // Line endings cannot matter.
    let (code, stdout, _) = run_check(&text.replace('\n', "\r\n"));
    assert_eq!(code, 1, "CRLF: {stdout}");
    // Turning the stale write into a rejected one would pass; the seal says it was edited.
    let edited = text.replace(
        r#""fence":1,"op":"persist_record","collection":"c1","accepted":true,"reason":null"#,
        r#""fence":1,"op":"persist_record","collection":"c1","accepted":false,"reason":"stale fence 1 < newest 2""#,
    );
    assert_ne!(edited, text);
    let (code, stdout, verdicts) = run_check(&edited);
    assert_eq!(code, 3, "{stdout}");
    assert!(stdout.contains("inconclusive: the history is damaged") && stdout.contains("digest"), "{stdout}");
    assert_eq!(verdicts["verdict"], "inconclusive");
    // The hand-written example is version 2: judged, and it says what could not be verified.
    let (_, stdout, _) = run_check(&example());
    assert!(stdout.contains("note: history version 2 carries no seal"), "{stdout}");
}

/// `--json` for scripts: stdout is one JSON document and nothing else; the lines a person reads go
/// to stderr; an error is a document too.
#[test]
fn json_puts_one_document_on_stdout_and_the_person_s_lines_on_stderr() {
    let dir = std::env::temp_dir().join(format!("leasequake-check-json-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("history.jsonl"), example()).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_leasequake")).arg("check").arg(&dir).arg("--json").output().unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is one JSON document");
    assert_eq!((out.status.code(), doc["verdict"].as_str()), (Some(1), Some("fail")));
    assert!(String::from_utf8_lossy(&out.stderr).contains("verdict: FAIL"), "the person's lines on stderr");
    let missing = Command::new(env!("CARGO_BIN_EXE_leasequake"))
        .arg("check")
        .arg(dir.join("none"))
        .arg("--json")
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&missing.stdout).expect("an error is a document too");
    assert_eq!((missing.status.code(), doc["exit"].as_i64()), (Some(2), Some(2)));
    assert!(doc["error"].as_str().unwrap().contains("not a directory"));
    std::fs::remove_dir_all(&dir).unwrap();
    let scenarios = concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios/smoke");
    let list = Command::new(env!("CARGO_BIN_EXE_leasequake")).args(["list", scenarios, "--json"]).output().unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&list.stdout).expect("list --json is one document");
    let names: Vec<&str> = doc.as_array().unwrap().iter().filter_map(|s| s["name"].as_str()).collect();
    assert!(names.contains(&"no-faults") && list.status.success(), "{names:?}");
}

fn fresh_dir(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("leasequake-check-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn check(dir: &std::path::Path) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_leasequake")).arg("check").arg(dir).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn verdicts_are_never_written_through_a_planted_link() {
    let dir = fresh_dir("link-out");
    std::fs::write(dir.join("history.jsonl"), example()).unwrap();
    let target = dir.join("precious.txt");
    std::fs::write(&target, "keep me").unwrap();
    std::os::unix::fs::symlink(&target, dir.join("verdicts.json")).unwrap();
    for i in 0..3 {
        // Links where a temporary file might be made: none is followed.
        let _ = std::os::unix::fs::symlink(&target, dir.join(format!(".verdicts.json.{i}.tmp")));
    }
    let _ = std::os::unix::fs::symlink(&target, dir.join("verdicts.tmp"));
    let (code, out) = check(&dir);
    assert_eq!(code, 1, "{out}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me", "the link's target is untouched");
    assert!(!dir.join("verdicts.json").symlink_metadata().unwrap().file_type().is_symlink(), "the link was replaced");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_history_that_is_a_link_or_no_file_is_refused_with_exit_2() {
    let dir = fresh_dir("link-in");
    let elsewhere = dir.join("elsewhere.jsonl");
    std::fs::write(&elsewhere, example()).unwrap();
    std::os::unix::fs::symlink(&elsewhere, dir.join("history.jsonl")).unwrap();
    let (code, out) = check(&dir);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("symbolic link"), "{out}");
    assert!(!dir.join("verdicts.json").exists(), "nothing written");
    std::fs::remove_file(dir.join("history.jsonl")).unwrap();
    std::fs::create_dir(dir.join("history.jsonl")).unwrap();
    let (code, out) = check(&dir);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("not a regular file"), "{out}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_bad_byte_is_inconclusive_naming_the_line_and_replaces_an_old_pass() {
    let dir = fresh_dir("bad-byte");
    let good =
        example().replace(r#""expected":null"#, r#""expected":{"property":"no_stale_write","why":"no fencing"}"#);
    std::fs::write(dir.join("history.jsonl"), &good).unwrap();
    let (code, out) = check(&dir);
    assert_eq!(code, 0, "{out}");
    let mut bytes = good.into_bytes();
    let third_line = bytes.iter().enumerate().filter(|(_, b)| **b == b'\n').nth(1).unwrap().0 + 5;
    bytes[third_line] = 0xff;
    std::fs::write(dir.join("history.jsonl"), &bytes).unwrap();
    let (code, out) = check(&dir);
    assert_eq!(code, 3, "{out}");
    assert!(out.contains(":3: unreadable history line (not UTF-8"), "{out}");
    let verdicts = std::fs::read_to_string(dir.join("verdicts.json")).unwrap();
    assert!(verdicts.contains("\"verdict\": \"inconclusive\""), "the old PASS is gone: {verdicts}");
    std::fs::remove_dir_all(&dir).unwrap();
}
