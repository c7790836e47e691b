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
