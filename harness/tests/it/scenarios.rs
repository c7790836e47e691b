//! Every checked-in scenario parses and validates; `leasequake list` shows each with its line;
//! `leasequake repro` given a directory that is no run names the runs it could replay.

use std::path::PathBuf;

use leasequake::scenario::{discover, load};

fn root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios"))
}

#[test]
fn every_checked_in_scenario_is_valid_and_uniquely_named() {
    let files = discover(&[root()]);
    assert!(files.len() >= 8, "{files:?}");
    let mut names = std::collections::BTreeSet::new();
    for f in &files {
        let s = load(f).unwrap_or_else(|e| panic!("{e}"));
        assert!(names.insert(s.name.clone()), "duplicate scenario name {}", s.name);
        assert!(s.incident.trim().len() > 80, "{}: the incident deserves a paragraph", s.name);
        let stem = f.file_stem().unwrap().to_string_lossy();
        assert_eq!(stem, s.name, "{}: the file is named after the scenario", f.display());
    }
}

/// README's scenario counts are `leasequake list`'s: "3 smoke, 28 nightly, ..." names each folder
/// under scenarios/ with the number of scenarios discovery finds there, and names every folder.
#[test]
fn the_readme_counts_the_scenarios_list_finds() {
    let readme = include_str!("../../../README.md");
    let line = readme.lines().find(|l| l.contains(" smoke, ")).expect("README counts the scenarios");
    let counted: Vec<(String, usize)> = line
        .replace(" and ", ", ")
        .split(", ")
        .filter_map(|part| {
            let mut words = part.split_whitespace();
            Some((words.next()?.parse().ok()?, words.next()?.to_owned()))
        })
        .map(|(n, folder): (usize, String)| (folder.replace("self-test", "selftest"), n))
        .collect();
    let mut folders: Vec<String> = std::fs::read_dir(root())
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    folders.sort();
    let mut named: Vec<String> = counted.iter().map(|(f, _)| f.clone()).collect();
    named.sort();
    assert_eq!(named, folders, "README names every folder of scenarios/: {line}");
    for (folder, n) in counted {
        assert_eq!(discover(&[root().join(&folder)]).len(), n, "README says {n} {folder} scenarios: {line}");
    }
}

#[test]
fn list_shows_every_scenario_and_a_broken_file_exits_2_naming_the_problem() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_leasequake")).arg("list").arg(root()).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("owner-paused-longer-than-ttl") && text.contains("SIGSTOP"), "{text}");
    let dir = std::env::temp_dir().join(format!("leasequake-list-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let broken =
        std::fs::read_to_string(root().join("smoke/no-faults.toml")).unwrap().replace("duration_s", "duraton_s");
    std::fs::write(dir.join("no-faults.toml"), broken).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_leasequake")).arg("list").arg(&dir).output().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("no-faults.toml:8") && err.contains("duraton_s"), "{err}");
}

#[test]
fn repro_given_a_suite_directory_names_its_runs_and_exits_2() {
    let suite = std::env::temp_dir().join(format!("leasequake-repro-suite-{}", std::process::id()));
    for run in ["01-no-faults", "02-owner-cut-from-redis"] {
        std::fs::create_dir_all(suite.join(run)).unwrap();
        std::fs::write(suite.join(run).join("scenario.toml"), "").unwrap();
    }
    let repro = |dir: &std::path::Path| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_leasequake")).arg("repro").arg(dir).output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (code, err) = repro(&suite);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("is a suite directory"), "{err}");
    assert!(err.contains(&suite.join("02-owner-cut-from-redis").display().to_string()), "{err}");
    let (code, err) = repro(&suite.join("nosuchrun"));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("is not a directory: give a run directory"), "{err}");
    std::fs::remove_dir_all(&suite).unwrap();
}

/// A run directory as a downloaded artifact might hold it: a valid scenario and schedule, and a
/// history header whose node command is anything at all.
fn hostile_run_dir(name: &str, schedule: &str, node_command: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("leasequake-hostile-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(root().join("smoke/no-faults.toml"), dir.join("scenario.toml")).unwrap();
    std::fs::write(dir.join("schedule.json"), schedule).unwrap();
    let header = format!(
        r#"{{"kind":"header","version":3,"run_id":"r","scenario":"no-faults","seed":1,"tenant":"t","policy":"enforce","fence_source":"store","expected":null,"liveness_bound_ms":1,"node_silence_ms":1,"observer_gap_ms":1,"started_ns":1,"node_command":{node_command}}}"#
    );
    std::fs::write(dir.join("history.jsonl"), header + "\n").unwrap();
    dir
}

fn leasequake(args: &[&std::ffi::OsStr]) -> (Option<i32>, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_leasequake")).args(args).output().unwrap();
    (out.status.code(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

#[test]
fn repro_runs_no_command_read_from_a_file_and_checks_the_schedule_first() {
    let marker = std::env::temp_dir().join(format!("leasequake-pwned-{}", std::process::id()));
    let sh = format!(r#"["/bin/sh","-c","touch {}"]"#, marker.display());
    let dir = hostile_run_dir("cmd", "[]", &sh);
    let (code, out) =
        leasequake(&["repro".as_ref(), dir.as_os_str(), "--report-dir".as_ref(), dir.join("r").as_os_str()]);
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("touch") && out.contains("--node-cmd") && out.contains("--run-recorded-command"), "{out}");
    assert!(!marker.exists(), "the recorded command ran");
    std::fs::remove_dir_all(&dir).unwrap();
    // A schedule naming a node, a time or a trigger that cannot be is refused before anything starts.
    let step = |target: &str, at_ms: u64, on: &str| {
        format!(
            r#"[{{"id":1,"kind":"pause","target":"{target}","at_ms":{at_ms},"duration_ms":1000,"link":null,"mode":null,"latency_ms":null,"follow_ms":null,"never_follow":null,"jump_ms":null,"unreplicated_acquire":null,"on":{on},"armed_ms":null}}]"#
        )
    };
    for (what, schedule, field) in [
        ("a node that does not exist", step("n99", 1000, "null"), "target"),
        ("a time out of range", step("n1", u64::MAX, "null"), "at_s"),
        ("a checkpoint that does not exist", step("n1", 1000, r#""checkpoint-99""#), "on"),
    ] {
        let dir = hostile_run_dir("schedule", &schedule, "null");
        let (code, out) =
            leasequake(&["repro".as_ref(), dir.as_os_str(), "--report-dir".as_ref(), dir.join("r").as_os_str()]);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(code, Some(2), "{what}: {out}");
        assert!(out.contains("schedule.json") && out.contains(field), "{what}: {out}");
    }
}

#[test]
fn bad_paths_and_arguments_exit_2_naming_the_fix() {
    let tmp = std::env::temp_dir().join(format!("leasequake-badpaths-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let file = tmp.join("a-file");
    std::fs::write(&file, "").unwrap();
    let smoke = root().join("smoke/no-faults.toml");
    let nope = tmp.join("nope");
    let cases: Vec<(&str, Vec<&std::ffi::OsStr>, &str)> = vec![
        ("check on a missing directory", vec!["check".as_ref(), nope.as_os_str()], "not a directory"),
        ("check without a history", vec!["check".as_ref(), tmp.as_os_str()], "has no history.jsonl"),
        ("repro without a history", vec!["repro".as_ref(), tmp.as_os_str()], "run directory"),
        (
            "a report directory that is a file",
            vec!["run".as_ref(), smoke.as_os_str(), "--report-dir".as_ref(), file.as_os_str()],
            "is a file",
        ),
        (
            "a duration that overflows",
            vec!["run".as_ref(), smoke.as_os_str(), "--max-duration".as_ref(), "4611686018427387904m".as_ref()],
            "outside",
        ),
    ];
    for (what, args, says) in cases {
        let (code, out) = leasequake(&args);
        assert_eq!(code, Some(2), "{what}: {out}");
        assert!(out.contains(says), "{what}: {out}");
    }
    std::fs::remove_dir_all(&tmp).unwrap();
}

#[test]
fn check_bounds_what_a_garbage_history_prints_and_escapes_it() {
    let dir = std::env::temp_dir().join(format!("leasequake-garbage-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let junk: String = (0..50_000).map(|i| format!("not json \u{1b}[2J line {i}\n")).collect();
    std::fs::write(dir.join("history.jsonl"), junk).unwrap();
    let (code, out) = leasequake(&["check".as_ref(), dir.as_os_str()]);
    let verdicts = std::fs::metadata(dir.join("verdicts.json")).unwrap().len();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(code, Some(3), "{out}");
    assert!(out.lines().count() < 100, "{} lines printed", out.lines().count());
    assert!(out.contains("more unreadable lines"), "{out}");
    assert!(!out.contains('\u{1b}'), "an escape sequence reached the terminal");
    assert!(verdicts < 100_000, "verdicts.json is {verdicts} bytes");
}

#[test]
fn a_node_command_that_cannot_start_exits_2_before_any_environment() {
    let smoke = root().join("smoke/no-faults.toml");
    for cmd in ["target/no-such-venv/bin/python node.py", "no-such-program-anywhere --flag"] {
        let (code, out) = leasequake(&["run".as_ref(), smoke.as_os_str(), "--node-cmd".as_ref(), cmd.as_ref()]);
        assert_eq!(code, Some(2), "{cmd}: {out}");
        assert!(out.contains("node command cannot be started") && !out.contains("starting the environment"), "{out}");
    }
}

#[test]
fn shrink_runs_no_command_read_from_a_file_and_refuses_a_run_that_did_not_fail() {
    let marker = std::env::temp_dir().join(format!("leasequake-pwned-shrink-{}", std::process::id()));
    let sh = format!(r#"["/bin/sh","-c","touch {}"]"#, marker.display());
    let dir = hostile_run_dir("shrink-cmd", "[]", &sh);
    let (code, out) =
        leasequake(&["shrink".as_ref(), dir.as_os_str(), "--report-dir".as_ref(), dir.join("r").as_os_str()]);
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("leasequake shrink") && out.contains("--run-recorded-command"), "{out}");
    assert!(!marker.exists(), "the recorded command ran");
    std::fs::remove_dir_all(&dir).unwrap();
    // A history that shows no failure (here: a header alone, which cannot be judged) is refused
    // before any run starts, and nothing is written.
    let dir = hostile_run_dir("shrink-nofail", "[]", "null");
    let reports = dir.join("r");
    let (code, out) = leasequake(&["shrink".as_ref(), dir.as_os_str(), "--report-dir".as_ref(), reports.as_os_str()]);
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("nothing to shrink"), "{out}");
    assert!(!reports.exists(), "a refused shrink wrote {}", reports.display());
    for (flag, value, says) in [("--confirm", "11", "11"), ("--budget", "0s", "0s")] {
        let (code, out) = leasequake(&["shrink".as_ref(), dir.as_os_str(), flag.as_ref(), value.as_ref()]);
        assert_eq!(code, Some(2), "{flag} {value}: {out}");
        assert!(out.contains(says), "{flag} {value}: {out}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn discovery_walks_a_link_loop_once_and_refuses_two_files_of_one_name() {
    let dir = std::env::temp_dir().join(format!("leasequake-loop-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("a")).unwrap();
    std::fs::copy(root().join("smoke/no-faults.toml"), dir.join("a/no-faults.toml")).unwrap();
    std::os::unix::fs::symlink(&dir, dir.join("a/back")).unwrap();
    let found = discover(std::slice::from_ref(&dir));
    assert_eq!(found.len(), 1, "each file once, through the loop too: {found:?}");
    let list = |d: &PathBuf| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_leasequake")).arg("list").arg(d).output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    assert_eq!(list(&dir).0, Some(0));
    std::fs::copy(root().join("smoke/no-faults.toml"), dir.join("a/twin.toml")).unwrap();
    let (code, err) = list(&dir);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("names must be unique"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_reader_that_goes_away_ends_list_quietly() {
    use std::io::Read;
    // More listing than a pipe holds (64 KiB), so the writer meets the closed pipe.
    let dir = std::env::temp_dir().join(format!("leasequake-many-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let text = std::fs::read_to_string(root().join("smoke/no-faults.toml")).unwrap();
    for i in 0..1500 {
        std::fs::write(
            dir.join(format!("s{i}.toml")),
            text.replace("name = \"no-faults\"", &format!("name = \"s{i}\"")),
        )
        .unwrap();
    }
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_leasequake"))
        .arg("list")
        .arg(&dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Read one byte, then close the pipe, as `| head -c1` does.
    let mut first = [0u8; 1];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn seeds_that_would_wrap_past_the_largest_are_refused() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_leasequake"))
        .args(["sim", "--first-seed", "18446744073709551615", "--seeds", "2"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("do not wrap"));
}
