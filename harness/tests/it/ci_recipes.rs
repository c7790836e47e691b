//! docs/ci's workflows are recipes people paste into real repositories: both parse as YAML, every
//! command they run exists (each scripts/nightly option, each leasequake subcommand and flag, asked
//! of the binary itself), and they carry what a real repository needs: the permission the JUnit
//! publisher needs, a cargo cache, the self-test as a job of its own, the job summary, artifacts
//! that do not keep `latest` twice, and GitLab's rule that `when` never sits beside `rules`.

use std::path::Path;
use std::process::Command;

use yaml_rust2::{Yaml, YamlLoader};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

fn load(rel: &str) -> Yaml {
    let text = std::fs::read_to_string(Path::new(ROOT).join(rel)).unwrap();
    let mut docs = YamlLoader::load_from_str(&text).unwrap_or_else(|e| panic!("{rel} is no YAML: {e}"));
    assert_eq!(docs.len(), 1, "{rel}: one document");
    docs.remove(0)
}

/// Every shell line under a `run`, `script`, `before_script` or `after_script` key, anywhere.
fn shell_lines(y: &Yaml, out: &mut Vec<String>) {
    match y {
        Yaml::Hash(h) => {
            for (k, v) in h {
                let shell = matches!(k.as_str(), Some("run" | "script" | "before_script" | "after_script"));
                match (shell, v) {
                    (true, Yaml::String(s)) => out.extend(s.lines().map(str::to_owned)),
                    (true, Yaml::Array(a)) => out.extend(a.iter().filter_map(Yaml::as_str).map(str::to_owned)),
                    _ => shell_lines(v, out),
                }
            }
        }
        Yaml::Array(a) => a.iter().for_each(|v| shell_lines(v, out)),
        _ => {}
    }
}

/// A line's words, double and single quotes joined into one word.
fn words(line: &str) -> Vec<String> {
    let (mut out, mut word, mut quote) = (Vec::new(), String::new(), None);
    for c in line.chars() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, c) if c.is_whitespace() => {
                if !word.is_empty() {
                    out.push(std::mem::take(&mut word));
                }
            }
            (_, c) => word.push(c),
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

/// The options scripts/nightly takes, read from its own `case` arms.
fn nightly_options() -> Vec<String> {
    let text = std::fs::read_to_string(Path::new(ROOT).join("scripts/nightly")).unwrap();
    text.lines()
        .filter_map(|l| l.trim().split(')').next())
        .flat_map(|arm| arm.split('|'))
        .filter(|w| w.starts_with("--") && w.chars().skip(2).all(|c| c.is_ascii_lowercase() || c == '-'))
        .map(str::to_owned)
        .collect()
}

/// Checks every command of `lines`: scripts exist and are executable, scripts/nightly options
/// exist, leasequake subcommands answer `--help` and list every flag the line gives them.
fn check_commands(file: &str, lines: &[String]) -> usize {
    let nightly = nightly_options();
    let mut checked = 0;
    for line in lines {
        let w = words(line);
        for (i, word) in w.iter().enumerate() {
            // Only a word in a command's place is a command (`cargo build --bin leasequake` is not).
            let commands = i == 0 || matches!(w[i - 1].as_str(), "&&" | "||" | ";" | "|");
            if !commands {
                continue;
            }
            if word.starts_with("scripts/") {
                let script = Path::new(ROOT).join(word);
                let mode =
                    std::fs::metadata(&script).map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()));
                assert!(mode.is_ok_and(|m| m & 0o111 != 0), "{file}: `{word}` is no executable script: {line}");
            }
            let flags = w[i + 1..].iter().take_while(|a| !matches!(a.as_str(), "&&" | "||" | "|" | ";" | ">>" | ">"));
            if word == "scripts/nightly" {
                for flag in flags.filter(|a| a.starts_with("--")) {
                    assert!(nightly.contains(flag), "{file}: scripts/nightly has no option {flag}: {line}");
                }
                checked += 1;
            } else if word.ends_with("/leasequake") && !word.starts_with("scripts/") || word == "leasequake" {
                let args: Vec<&String> = flags.collect();
                let sub: Vec<&str> =
                    args.iter().take_while(|a| !a.starts_with('-') && !a.contains('/')).map(|a| a.as_str()).collect();
                assert!(!sub.is_empty(), "{file}: leasequake without a subcommand: {line}");
                let help = Command::new(env!("CARGO_BIN_EXE_leasequake")).args(&sub).arg("--help").output().unwrap();
                let text = String::from_utf8_lossy(&help.stdout);
                assert!(help.status.success(), "{file}: `leasequake {}` is no command: {line}", sub.join(" "));
                for flag in args.iter().filter(|a| a.starts_with("--")) {
                    assert!(
                        text.contains(flag.as_str()),
                        "{file}: `leasequake {}` has no {flag}: {line}",
                        sub.join(" ")
                    );
                }
                checked += 1;
            }
        }
    }
    checked
}

fn jobs(y: &Yaml) -> Vec<(&str, &Yaml)> {
    y["jobs"].as_hash().unwrap().iter().map(|(k, v)| (k.as_str().unwrap(), v)).collect()
}

fn lines_of(y: &Yaml) -> Vec<String> {
    let mut out = Vec::new();
    shell_lines(y, &mut out);
    out
}

#[test]
fn the_github_workflow_parses_calls_what_exists_and_has_what_a_real_repository_needs() {
    let file = "docs/ci/github-nightly.yml";
    let y = load(file);
    assert_eq!(y["permissions"]["checks"].as_str(), Some("write"), "{file}: the JUnit publisher needs checks: write");
    assert_eq!(y["permissions"]["contents"].as_str(), Some("read"), "{file}: checkout needs contents: read");
    assert_eq!(check_commands(file, &lines_of(&y)), 4, "{file}: three scripts/nightly jobs and the merge");
    for (name, job) in jobs(&y) {
        assert!(job["timeout-minutes"].as_i64().is_some(), "{file}: job {name} has no timeout-minutes");
        let steps = job["steps"].as_vec().unwrap();
        let uses =
            |what: &str| steps.iter().filter(|s| s["uses"].as_str().is_some_and(|u| u.starts_with(what))).count();
        assert_eq!(uses("actions/cache@"), 1, "{file}: job {name} builds with cargo: cache it");
        for s in steps.iter().filter(|s| s["uses"].as_str().is_some_and(|u| u.starts_with("actions/upload-artifact@")))
        {
            let path = s["with"]["path"].as_str().unwrap();
            assert!(
                path.lines().any(|p| p.trim().starts_with('!') && p.contains("latest")),
                "{file}: {name} keeps `latest` twice"
            );
        }
        let lines = lines_of(job);
        if lines.iter().any(|l| l.contains("scripts/nightly") && !l.contains("--only sim")) || name == "merge" {
            assert!(
                lines.iter().any(|l| l.contains("summary.md") && l.contains("$GITHUB_STEP_SUMMARY")),
                "{file}: {name}: no job summary"
            );
        }
    }
    let nightly: Vec<String> = lines_of(&y).into_iter().filter(|l| l.contains("scripts/nightly")).collect();
    assert!(nightly.iter().any(|l| l.contains("--only selftest")), "{file}: the self-test is a job of its own");
    assert!(
        nightly.iter().filter(|l| l.contains("--shard")).all(|l| l.contains("--only scenarios")),
        "{file}: shards run scenarios only"
    );
}

#[test]
fn the_gitlab_pipeline_parses_calls_what_exists_and_keeps_gitlab_s_rules() {
    let file = "docs/ci/gitlab-nightly.yml";
    let y = load(file);
    assert_eq!(check_commands(file, &lines_of(&y)), 4, "{file}: three scripts/nightly jobs and the merge");
    let top = y.as_hash().unwrap();
    let stages: Vec<&str> = y["stages"].as_vec().unwrap().iter().filter_map(Yaml::as_str).collect();
    let reserved = ["stages", "variables", "default", "include", "workflow"];
    let mut nightly_jobs = 0;
    for (k, job) in top {
        let name = k.as_str().unwrap();
        if reserved.contains(&name) || name.starts_with('.') {
            continue;
        }
        assert!(stages.contains(&job["stage"].as_str().unwrap_or("")), "{file}: job {name} has no known stage");
        assert_eq!(job["extends"].as_str(), Some(".leasequake"), "{file}: {name} takes the cache, tags and rules");
        assert!(
            job["when"].is_badvalue() || job["rules"].is_badvalue(),
            "{file}: {name}: `when` beside `rules` is refused by GitLab"
        );
        assert_eq!(job["artifacts"]["when"].as_str(), Some("always"), "{file}: {name} keeps its reports on failure");
        for p in job["artifacts"]["paths"].as_vec().unwrap() {
            assert!(!p.as_str().unwrap().ends_with("latest"), "{file}: {name} keeps `latest` twice");
        }
        if lines_of(job).iter().any(|l| l.contains("--only scenarios") || l.contains("--only selftest")) {
            assert!(job["artifacts"]["reports"]["junit"].as_str().is_some(), "{file}: {name} publishes JUnit");
            nightly_jobs += 1;
        }
    }
    assert_eq!(nightly_jobs, 2, "{file}: the scenario shards and the self-test, each a job");
    assert!(!y[".leasequake"]["cache"]["paths"].is_badvalue(), "{file}: a cargo cache");
}

#[test]
fn the_command_checks_catch_a_recipe_that_calls_what_does_not_exist() {
    for bad in
        ["scripts/nightly --shards 1/2", "target/debug/leasequake report mrege x", "leasequake run --no-such-flag x"]
    {
        let caught = std::panic::catch_unwind(|| check_commands("bad.yml", &[bad.to_owned()]));
        assert!(caught.is_err(), "not caught: {bad}");
    }
    assert_eq!(check_commands("good.yml", &["scripts/nightly --only sim --sim-seconds 600".to_owned()]), 1);
}
