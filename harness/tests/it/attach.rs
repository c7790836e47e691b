//! `leasequake run --env RUN_ID`: scenarios run in an environment that `leasequake env up` keeps
//! running, one after another, each judged on its own records; the environment outlives them and
//! Ctrl-C on `env up` removes it. Bad attachments fail before anything starts, with exit 2.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use leasequake_reports::history::{EnvChange, EnvEvent, HistoryLine};

const SCENARIO: &str = r#"name = "attached"
description = "test"
incident = "A scenario written by the attach integration test, short on purpose."
duration_s = 8

[nodes]
count = 2

[lease]
ttl_ms = 1500

[pipeline]
embed_ms = 50

[store]
policy = "enforce"
fence_source = "store"

[[faults]]
kind = "partition"
target = "owner"
link = "redis"
mode = "reset"
at_s = 1
duration_s = 2
"#;

fn leasequake(args: &[&str], dir: &std::path::Path) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_leasequake"))
        .args(args)
        .current_dir(dir)
        .env("LEASEQUAKE_REDIS_PASSWORD", "only-for-the-unknown-env")
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn header(run_dir: &std::path::Path) -> leasequake_reports::history::Header {
    let text = std::fs::read_to_string(run_dir.join("history.jsonl")).unwrap();
    match serde_json::from_str(text.lines().next().unwrap()).unwrap() {
        HistoryLine::Header(h) => h,
        other => panic!("not a header: {other:?}"),
    }
}

fn walk_has(dir: &std::path::Path, name: &str) -> bool {
    std::fs::read_dir(dir).unwrap().any(|e| {
        let p = e.unwrap().path();
        p.file_name().is_some_and(|n| n == name) || (p.is_dir() && !p.is_symlink() && walk_has(&p, name))
    })
}

fn running(run_id: &str) -> usize {
    let out = Command::new("docker")
        .args(["ps", "-q", "--filter", &format!("label=io.leasequake.run={run_id}")])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).split_whitespace().count()
}

/// Ctrl-C to `env up`: it then removes its environment.
fn interrupt(up: &std::process::Child) {
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(up.id() as i32).unwrap(),
        rustix::process::Signal::INT,
    )
    .unwrap();
}

/// `env up`, interrupted and waited for if the test ends early (a failed assertion), so neither
/// the process nor its environment outlives the test; with its output, kept open until then
/// (closed, `env up` would die of a broken pipe at Ctrl-C and leave its environment).
struct EnvUp(Option<std::process::Child>, Option<BufReader<std::process::ChildStdout>>);

impl Drop for EnvUp {
    fn drop(&mut self) {
        if let Some(mut up) = self.0.take() {
            interrupt(&up);
            let _ = up.wait();
        }
    }
}

/// Every distinct command line of every process on the machine, read every 50 ms until `stop`:
/// what `ps` shows any local user (containers' processes included).
fn command_lines(
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<(std::collections::HashSet<String>, u64)> {
    std::thread::spawn(move || {
        let mut seen = std::collections::HashSet::new();
        let mut scans = 0u64;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
                if let Ok(bytes) = std::fs::read(e.path().join("cmdline")) {
                    if seen.len() < 100_000 {
                        seen.insert(String::from_utf8_lossy(&bytes).replace('\0', " "));
                    }
                }
            }
            scans += 1;
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        (seen, scans)
    })
}

#[test]
fn scenarios_run_one_after_another_in_an_environment_env_up_keeps() {
    let dir = std::env::temp_dir().join(format!("leasequake-attach-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("attached.toml"), SCENARIO).unwrap();
    // From before the environment starts to after the runs: the password is on no command line.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let scanner = command_lines(stop.clone());
    let (mut up, run_id) = env_up("2");

    // Two runs in the same environment, each judged on its own records.
    let args = ["run", "attached.toml", "--env", &run_id, "--report-dir", "reports"];
    let (code, out, err) = leasequake(&args, &dir);
    assert_eq!(code, Some(0), "{out}\n{err}");
    let (code, out, err) = leasequake(&args, &dir);
    assert_eq!(code, Some(0), "the second run in the same environment passes too: {out}\n{err}");
    assert!(err.contains(&format!("attached to environment {run_id}")), "{err}");
    // One suite directory per `leasequake run`, one run directory in each.
    let mut suites: Vec<_> = std::fs::read_dir(dir.join("reports"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !p.ends_with("latest"))
        .collect();
    suites.sort();
    let runs: Vec<_> = suites
        .iter()
        .map(|s| std::fs::read_dir(s).unwrap().map(|e| e.unwrap().path()).find(|p| p.is_dir()).unwrap())
        .collect();
    let (first, second) = (header(&runs[0]), header(&runs[1]));
    assert_eq!(first.run_id, run_id);
    assert!(second.audit_after > first.audit_after, "the second run starts after the first's audit records");
    assert_ne!(first.tenant, second.tenant, "each run has a tenant of its own");
    assert_eq!(running(&run_id), 7, "the environment outlives the runs");

    // No file the runs wrote holds the Redis password: histories, verdicts, harness logs, node
    // stderr (which saw connection resets), container logs, the reports.
    let password = std::fs::read_to_string(leasequake::env::password_file(&run_id)).unwrap();
    assert!(password.trim().len() >= 16);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (lines, scans) = scanner.join().unwrap();
    assert!(scans > 100 && lines.iter().any(|l| l.contains("redis-cli")), "{scans} scans saw the observer's execs");
    let shown: Vec<&String> = lines.iter().filter(|l| l.contains(password.trim())).collect();
    assert!(shown.is_empty(), "the Redis password on a command line: {shown:?}");
    let mut stack = vec![dir.join("reports")];
    let mut files = 0;
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_symlink() {
                continue;
            } else if p.is_dir() {
                stack.push(p);
            } else {
                files += 1;
                let bytes = std::fs::read(&p).unwrap();
                assert!(
                    !String::from_utf8_lossy(&bytes).contains(password.trim()),
                    "{} holds the Redis password",
                    p.display()
                );
            }
        }
    }
    for must in ["report.html", "junit.xml", "summary.json", "summary.md", "redis-primary.log", "n1.stderr.log"] {
        assert!(walk_has(&dir.join("reports"), must), "no {must} was written");
    }
    assert!(files > 20, "{files} files searched");

    // Bad attachments: exit 2 before anything starts, naming the problem and the fix.
    let (code, _, err) = leasequake(&["run", "attached.toml", "--env", "nosuchenv"], &dir);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("nosuchenv") && err.contains("Fix:"), "{err}");
    let wrong = dir.join("wrong-password");
    std::fs::write(&wrong, "not-the-password").unwrap();
    let wrong = wrong.display().to_string();
    let (code, _, err) = leasequake(&["run", "attached.toml", "--env", &run_id, "--redis-password-file", &wrong], &dir);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("password") && !err.contains("not-the-password"), "named, never echoed: {err}");

    // Ctrl-C on env up removes it.
    let mut up = up.0.take().unwrap();
    interrupt(&up);
    assert!(up.wait().unwrap().success());
    assert_eq!(running(&run_id), 0, "env up removed its environment");
    std::fs::remove_dir_all(dir).unwrap();
}

/// `env up` in the background: the process (removed on drop) and the run id it printed.
fn env_up(nodes: &str) -> (EnvUp, String) {
    let mut up = EnvUp(
        Some(
            Command::new(env!("CARGO_BIN_EXE_leasequake"))
                .args(["env", "up", "--nodes", nodes])
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        ),
        None,
    );
    let mut stdout = BufReader::new(up.0.as_mut().unwrap().stdout.take().unwrap());
    let mut run_id = String::new();
    for _ in 0..20 {
        let mut line = String::new();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "env up ended before it was ready");
        if let Some(rest) = line.strip_prefix("environment ") {
            run_id = rest.split_whitespace().next().unwrap().to_owned();
        }
        if line.starts_with("Ctrl-C") {
            break;
        }
    }
    assert!(!run_id.is_empty(), "env up printed no run id");
    up.1 = Some(stdout);
    (up, run_id)
}

/// A run of a scenario with no fault, during which `disturb` changes the environment (given the
/// environment's run id) once the run is under way: its exit code, its output and its run
/// directory.
fn run_disturbed(name: &str, follow: bool, disturb: impl FnOnce(&str)) -> (Option<i32>, String, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("leasequake-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut quiet = SCENARIO.split("[[faults]]").next().unwrap().replace("duration_s = 8", "duration_s = 20");
    if follow {
        quiet = quiet.replace("count = 2", "count = 2\nfollow_failovers = true");
    }
    std::fs::write(dir.join("attached.toml"), quiet).unwrap();
    let (_up, run_id) = env_up("2");
    let run = Command::new(env!("CARGO_BIN_EXE_leasequake"))
        .args(["run", "attached.toml", "--env", &run_id, "--report-dir", "reports"])
        .current_dir(&dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Once the run has begun (its suite directory exists; `latest` is linked only at the end).
    let begun =
        || std::fs::read_dir(dir.join("reports")).is_ok_and(|mut d| d.any(|e| e.is_ok_and(|e| e.path().is_dir())));
    for _ in 0..300 {
        if begun() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(begun(), "the run never began");
    std::thread::sleep(std::time::Duration::from_secs(5));
    disturb(&run_id);
    let out = run.wait_with_output().unwrap();
    let text = format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let latest = dir.join("reports").join("latest");
    let run_dir = std::fs::read_dir(&latest).unwrap().map(|e| e.unwrap().path()).find(|p| p.is_dir()).unwrap();
    (out.status.code(), text, run_dir)
}

/// Sentinel fails over with no fault declared: as it did on its own during a long write pause.
fn fail_over(run_id: &str) {
    let sentinel = format!("lq-{run_id}-sentinel-1");
    let failover = Command::new("docker")
        .args(["exec", &sentinel, "redis-cli", "-p", "26379", "SENTINEL", "FAILOVER", leasequake::env::MASTER_NAME])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&failover.stdout).contains("OK"), "{failover:?}");
}

fn run_with_an_undeclared_failover(name: &str, follow: bool) -> (Option<i32>, String, std::path::PathBuf) {
    run_disturbed(name, follow, fail_over)
}

fn history_of(run_dir: &std::path::Path) -> Vec<HistoryLine> {
    let text = std::fs::read_to_string(run_dir.join("history.jsonl")).unwrap();
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// The environment events of a history.
fn environment_events(run_dir: &std::path::Path) -> Vec<EnvEvent> {
    history_of(run_dir)
        .into_iter()
        .filter_map(|l| match l {
            HistoryLine::Environment(e) => Some(e),
            _ => None,
        })
        .collect()
}

#[test]
fn a_failover_no_fault_declared_is_drift_and_the_run_is_inconclusive_naming_it() {
    let (code, out, run_dir) = run_with_an_undeclared_failover("drift", false);
    assert_eq!(code, Some(3), "{out}");
    assert!(out.contains("INCONCLUSIVE") && out.contains("drifted") && out.contains("redis-replica"), "{out}");
    // The Sentinels' own announcement of it is in the history, as an environment event.
    let events = environment_events(&run_dir);
    assert!(
        events.iter().any(|e| e.change == EnvChange::SwitchMaster && e.subject == "redis-replica"),
        "no +switch-master in {events:?}"
    );
    std::fs::remove_dir_all(run_dir.ancestors().nth(3).unwrap()).unwrap();
}

#[test]
fn with_follow_failovers_the_nodes_follow_an_undeclared_failover_and_the_run_is_judged() {
    let (code, out, run_dir) = run_with_an_undeclared_failover("follow", true);
    assert_eq!(code, Some(0), "{out}");
    // The nodes followed: a round completed on the new master, after the observer saw it promoted.
    let lines = history_of(&run_dir);
    let promoted = lines
        .iter()
        .find_map(|l| match l {
            HistoryLine::Observer(o) if o.instance == "redis-replica" && o.role.as_deref() == Some("master") => {
                Some(o.at_ns)
            }
            _ => None,
        })
        .expect("the observer saw redis-replica promoted");
    let synced_after = lines.iter().any(|l| {
        matches!(l, HistoryLine::Audit(a) if a.accepted && a.mono_ns > promoted
            && a.op == leasequake_reports::history::StoreOp::PersistRecord)
    });
    assert!(synced_after, "no round completed after the failover: the nodes did not follow");
    std::fs::remove_dir_all(run_dir.ancestors().nth(3).unwrap()).unwrap();
}

#[test]
fn a_container_restarted_with_no_fault_declared_is_drift_naming_it() {
    // sentinel-3 restarts: the nodes never notice (two Sentinels keep the quorum), so without the
    // watcher this run would pass; with it, the run is inconclusive and names the container.
    let (code, out, run_dir) = run_disturbed("container", false, |run_id| {
        let restart = Command::new("docker").args(["restart", &format!("lq-{run_id}-sentinel-3")]).output().unwrap();
        assert!(restart.status.success(), "{restart:?}");
    });
    assert_eq!(code, Some(3), "{out}");
    assert!(out.contains("drifted: sentinel-3") && out.contains("the container stopped"), "{out}");
    let events = environment_events(&run_dir);
    let by_docker = |e: &&EnvEvent| e.subject == "sentinel-3" && e.source == "docker";
    let changes: Vec<EnvChange> = events.iter().filter(by_docker).map(|e| e.change).collect();
    assert_eq!(changes, [EnvChange::ContainerDied, EnvChange::ContainerStarted], "{events:?}");
    std::fs::remove_dir_all(run_dir.ancestors().nth(3).unwrap()).unwrap();
}

#[test]
fn a_proxy_disabled_with_no_fault_declared_is_drift_naming_it() {
    let (code, out, run_dir) = run_disturbed("proxy", false, |run_id| {
        let answer = post(&proxy_api(run_id), "/proxies/n2-store", r#"{"enabled":false}"#);
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    });
    assert_eq!(code, Some(3), "{out}");
    assert!(out.contains("drifted: n2-store") && out.contains("disabled"), "{out}");
    std::fs::remove_dir_all(run_dir.ancestors().nth(3).unwrap()).unwrap();
}

/// The proxy API's address on the host, from Docker.
fn proxy_api(run_id: &str) -> String {
    let out = Command::new("docker").args(["port", &format!("lq-{run_id}-proxy"), "8474"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let port = text.lines().next().and_then(|l| l.rsplit(':').next()).unwrap_or_default().trim().to_owned();
    format!("127.0.0.1:{port}")
}

/// One HTTP POST, answered in full (the server closes the connection).
fn post(addr: &str, path: &str, body: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    answer
}
