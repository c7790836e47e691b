//! `leasequake sim` as a user runs it: a seed replays to the same history, a failing seed is kept
//! and re-judged by `check`, bad input exits 2 naming the fix.

use std::process::Command;

fn sim(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_leasequake"))
        .current_dir(env!("CARGO_MANIFEST_DIR").to_owned() + "/..")
        .arg("sim")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn hash(out: &str) -> String {
    out.lines().find_map(|l| l.split_once(" history ").map(|(_, h)| h.to_owned())).unwrap_or_default()
}

#[test]
fn a_seed_replays_to_the_same_history_and_is_kept_for_check() {
    let dir = std::env::temp_dir().join(format!("leasequake-sim-it-{}", std::process::id()));
    let report = dir.to_string_lossy().into_owned();
    let (code, a, err) = sim(&["--seed", "11", "--virtual-s", "20", "--report-dir", &report]);
    assert_eq!(code, Some(0), "{a}{err}");
    let (_, b, _) = sim(&["--seed", "11", "--virtual-s", "20", "--report-dir", &report]);
    assert!(!hash(&a).is_empty() && hash(&a) == hash(&b), "{a}\n{b}");
    let (_, c, _) = sim(&["--seed", "12", "--virtual-s", "20", "--report-dir", &report]);
    assert_ne!(hash(&a), hash(&c));
    // The kept seed is a run directory `check` re-judges to the same verdict.
    let run = std::fs::read_dir(dir.join("latest")).unwrap().flatten().map(|e| e.path()).find(|p| p.is_dir()).unwrap();
    let check = Command::new(env!("CARGO_BIN_EXE_leasequake")).arg("check").arg(&run).output().unwrap();
    assert_eq!(check.status.code(), Some(0), "{}", String::from_utf8_lossy(&check.stdout));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every file under `dir`, as text, concatenated.
fn all_text(dir: &std::path::Path) -> String {
    let mut text = String::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            text += &all_text(&p);
        } else {
            text += &std::fs::read_to_string(&p).unwrap_or_default();
        }
    }
    text
}

#[test]
fn nodes_overrides_the_scenarios_count_and_the_kept_repro_says_so() {
    let dir = std::env::temp_dir().join(format!("leasequake-sim-nodes-{}", std::process::id()));
    let (one_dir, three_dir) = (dir.join("one"), dir.join("three"));
    let args = |d: &std::path::Path| {
        ["--seed", "11", "--virtual-s", "20", "--report-dir"]
            .map(str::to_owned)
            .to_vec()
            .into_iter()
            .chain([d.to_string_lossy().into_owned()])
            .collect::<Vec<_>>()
    };
    let one_args: Vec<String> = args(&one_dir).into_iter().chain(["--nodes".into(), "1".into()]).collect();
    let (code, one, err) = sim(&one_args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(code, Some(0), "{one}{err}");
    let (_, three, _) = sim(&args(&three_dir).iter().map(String::as_str).collect::<Vec<_>>());
    assert!(!hash(&one).is_empty() && hash(&one) != hash(&three), "{one}\n{three}");
    let kept = all_text(&one_dir);
    let repro = "--seed 11 --scenario scenarios/sim/recommended.toml --virtual-s 20 --nodes 1";
    assert!(kept.contains(repro), "the kept run's repro names --nodes 1");
    assert!(kept.contains("\"n1\"") && !kept.contains("\"n2\""), "one node ran, n2 never appears");
    assert!(all_text(&three_dir).contains("\"n3\""), "without --nodes, the scenario's three");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_input_exits_2_naming_the_problem() {
    let (code, _, err) = sim(&["--seed", "1", "--nodes", "17"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--nodes"), "{err}");
    let (code, _, err) = sim(&["--seeds", "0"]);
    assert_eq!(code, Some(2), "{err}");
    let (code, out, err) = sim(&["--seed", "1", "--scenario", "scenarios/sim/no-such.toml"]);
    assert_eq!(code, Some(2), "{out}{err}");
    assert!(err.contains("no-such.toml"), "{err}");
    let (code, _, err) = sim(&["--seed", "1", "--flaw", "non-sticky-loss"]);
    assert_eq!(code, Some(2), "a production build runs no flaw: {err}");
    assert!(err.contains("target/flawed"), "{err}");
}

#[test]
fn sigterm_stops_the_seeds_with_the_counts_so_far_and_exit_3() {
    let dir = std::env::temp_dir().join(format!("leasequake-sim-term-{}", std::process::id()));
    let mut child = Command::new(env!("CARGO_BIN_EXE_leasequake"))
        .current_dir(env!("CARGO_MANIFEST_DIR").to_owned() + "/..")
        .args(["sim", "--seeds", "100000", "--virtual-s", "20", "--report-dir"])
        .arg(&dir)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(3));
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    // Bounded: a stop does not wait for seeds still running (a world that never ends included).
    let began = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if began.elapsed() > std::time::Duration::from_secs(60) {
            let _ = child.kill();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let mut out = String::new();
    std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut out).unwrap();
    assert_eq!(status.and_then(|s| s.code()), Some(3), "{out}");
    assert!(out.contains("stopped: interrupted after"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn export_writes_the_shrunk_schedule_as_a_scenario_that_fails_again_and_refuses_a_passing_seed() {
    let dir = std::env::temp_dir().join(format!("leasequake-sim-export-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Redis's fence counter behind an enforcing store: a restart without persistence starts it
    // from zero and the store refuses every lower fence; the slow store before it changes nothing.
    let hazard = dir.join("restart-hazard.toml");
    std::fs::write(
        &hazard,
        "name = \"restart-hazard\"\ndescription = \"d\"\nincident = \"i\"\nduration_s = 30\n[nodes]\ncount = 3\n\
         [lease]\nttl_ms = 1500\n[store]\npolicy = \"enforce\"\nfence_source = \"redis\"\n[sentinel]\ndown_after_ms = 5000\n\
         [[faults]]\nkind = \"slow_store\"\nat_s = 8\nduration_s = 3\nlatency_ms = 100\n\
         [[faults]]\nkind = \"redis_restart\"\nat_s = 15\nduration_s = 4\n",
    )
    .unwrap();
    let out = dir.join("found.toml");
    let (h, o) = (hazard.to_string_lossy().into_owned(), out.to_string_lossy().into_owned());
    // A restart without persistence behind an enforcing store is this configuration's hazard:
    // the user says so (--as-hazard), and the export declares it.
    let (code, stdout, err) =
        sim(&["--seed", "5", "--scenario", &h, "--virtual-s", "30", "--export", &o, "--as-hazard", "--no-shrink"]);
    assert_eq!(code, Some(1), "a finding exits 1: {stdout}{err}");
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("[expected]") && text.contains("property = \"liveness\""), "{text}");
    // Unsaid, a correct lease's finding is a plain scenario the correct lease must pass.
    let (code, stdout, err) = sim(&["--seed", "5", "--scenario", &h, "--virtual-s", "30", "--export", &o]);
    assert_eq!(code, Some(1), "a finding exits 1: {stdout}{err}");
    assert!(stdout.contains("seed 5 violates liveness with 2 faults"), "{stdout}");
    assert!(stdout.contains("without slow_store") && stdout.contains("checked:"), "{stdout}");
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("kind = \"redis_restart\"") && !text.contains("slow_store"), "{text}");
    assert!(!text.contains("[expected]") && text.contains("property = \"liveness\""), "{text}");
    assert!(text.contains("must pass"), "{text}");
    let list = Command::new(env!("CARGO_BIN_EXE_leasequake")).arg("list").arg(&out).output().unwrap();
    assert_eq!(
        list.status.code(),
        Some(0),
        "the export is a valid scenario: {}",
        String::from_utf8_lossy(&list.stderr)
    );
    let (code, _, err) = sim(&["--seed", "11", "--virtual-s", "20", "--export", &o]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("nothing to export"), "{err}");
    let (code, _, err) = sim(&["--seeds", "3", "--export", &o]);
    assert_eq!(code, Some(2), "--export takes one --seed: {err}");
    // A batch exports each finding beside its history.
    let reports = dir.join("reports").to_string_lossy().into_owned();
    let (code, stdout, err) = sim(&[
        "--first-seed",
        "5",
        "--seeds",
        "2",
        "--scenario",
        &h,
        "--virtual-s",
        "30",
        "--export-findings",
        "--report-dir",
        &reports,
    ]);
    assert_eq!(code, Some(1), "{stdout}{err}");
    let shrunk: Vec<_> = walk(&dir.join("reports")).into_iter().filter(|p| p.ends_with("shrunk.toml")).collect();
    assert_eq!(shrunk.len(), 2, "one export per failing seed: {stdout}");
    for file in &shrunk {
        let text = std::fs::read_to_string(file).unwrap();
        assert!(text.contains("[origin]") && text.contains("kind = \"redis_restart\""), "{text}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every file under `dir`, not following links (a suite's `latest` is one).
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = entry.path();
        if entry.file_type().is_ok_and(|t| t.is_symlink()) {
            continue;
        }
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn a_time_box_ends_a_batch_as_planned_and_judges_the_seeds_it_ran() {
    let dir = std::env::temp_dir().join(format!("leasequake-sim-box-{}", std::process::id()));
    let reports = dir.to_string_lossy().into_owned();
    let (code, stdout, err) =
        sim(&["--seeds", "1000000", "--virtual-s", "10", "--time-box", "2s", "--report-dir", &reports]);
    assert!(stdout.contains("the time box ended the batch after"), "{stdout}{err}");
    assert!(!stdout.contains("interrupted"), "a planned end is no interruption: {stdout}");
    let ran: u64 = stdout
        .lines()
        .find_map(|l| l.split(" seeds of ").next().filter(|_| l.contains(" seeds of 10 virtual s"))?.parse().ok())
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(ran > 0 && ran < 1_000_000, "{stdout}");
    // 10 virtual s leave no room for a fault and its liveness bound: every seed runs fault-free.
    assert!(stdout.contains("FAIL 0  INCONCLUSIVE 0"), "{stdout}");
    assert_eq!(code, Some(0), "judged by the seeds it ran: {stdout}");
    let (code, _, err) = sim(&["--seed", "3", "--time-box", "2s"]);
    assert_eq!(code, Some(2), "a time box is for a batch: {err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn first_failure_is_the_smallest_failing_seed_however_the_workers_interleave() {
    let dir = std::env::temp_dir().join(format!("leasequake-sim-first-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Every seed fails (Redis's fences behind an enforcing store, then a restart): with two
    // workers, seed 6 may be judged before seed 5; seed 5 is still the first failure.
    let hazard = dir.join("restart-hazard.toml");
    std::fs::write(
        &hazard,
        "name = \"restart-hazard\"\ndescription = \"d\"\nincident = \"i\"\nduration_s = 30\n[nodes]\ncount = 3\n\
         [lease]\nttl_ms = 1500\n[store]\npolicy = \"enforce\"\nfence_source = \"redis\"\n[sentinel]\ndown_after_ms = 5000\n\
         [[faults]]\nkind = \"redis_restart\"\nat_s = 15\nduration_s = 4\n",
    )
    .unwrap();
    let (h, reports) = (hazard.to_string_lossy().into_owned(), dir.join("r").to_string_lossy().into_owned());
    for _ in 0..3 {
        let (code, stdout, err) = sim(&[
            "--first-seed",
            "5",
            "--seeds",
            "40",
            "--scenario",
            &h,
            "--virtual-s",
            "30",
            "--first-failure",
            "--workers",
            "2",
            "--report-dir",
            &reports,
        ]);
        assert_eq!(code, Some(1), "{stdout}{err}");
        assert!(stdout.contains("first failure: seed 5\n"), "{stdout}");
        let judged = stdout.lines().filter(|l| l.starts_with("FAIL")).count();
        assert!((1..=3).contains(&judged), "no seed after the first failure starts: {stdout}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
