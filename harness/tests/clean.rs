//! `leasequake clean` after a SIGKILLed harness: zero labelled containers and networks are left.
//!
//! Its own test binary, because `clean` removes every labelled object: cargo runs test binaries
//! one after another, so no other test's environment is alive while this one runs. (Do not run a
//! suite by hand at the same time.)

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

fn labelled(what: &[&str]) -> usize {
    let out =
        Command::new("docker").args(what).args(["--filter", "label=io.leasequake.managed=true"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).split_whitespace().count()
}

#[test]
fn clean_removes_what_a_sigkilled_harness_left_behind() {
    // Its stderr kept, so a start that fails says why.
    let log = std::env::temp_dir().join(format!("leasequake-clean-test-{}.stderr", std::process::id()));
    let mut up = Command::new(env!("CARGO_BIN_EXE_leasequake"))
        .args(["env", "up", "--nodes", "1"])
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(up.stdout.take().unwrap());
    let mut seen = String::new();
    while !seen.contains("Ctrl-C") {
        let mut line = String::new();
        if stdout.read_line(&mut line).unwrap() == 0 {
            let why = std::fs::read_to_string(&log).unwrap_or_default();
            panic!("env up ended before it was ready: {seen}{why}");
        }
        seen.push_str(&line);
    }
    // SIGKILL: no chance to clean up; its containers and networks stay behind.
    up.kill().unwrap();
    up.wait().unwrap();
    assert!(labelled(&["ps", "-aq"]) >= 7, "the killed harness left its containers");
    assert!(labelled(&["network", "ls", "-q"]) >= 2, "and its networks");

    let out = Command::new(env!("CARGO_BIN_EXE_leasequake")).arg("clean").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(labelled(&["ps", "-aq"]), 0, "no labelled container is left");
    assert_eq!(labelled(&["network", "ls", "-q"]), 0, "no labelled network is left");
    assert!(labelled(&["images", "-q"]) > 0, "the images stay (only --images removes them)");
}
