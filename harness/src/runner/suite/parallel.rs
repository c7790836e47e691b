//! `run --parallel N`: N child runs of this binary over the shards, their output prefixed (on a
//! terminal, a live line per child below the results: `progress::Board`), then one merged suite. The images are ensured first, so that the children only reuse them; SIGTERM
//! is passed on to every child, so that each heals and cleans up.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;

use tokio::io::{AsyncBufReadExt, AsyncRead};
use tokio::process::Child;
use tokio::task::JoinHandle;

use super::{terminated, Request};
use crate::error::HarnessError;
use crate::exit::Exit;
use crate::image::{self, ImageSpec};
use crate::progress::{Board, BOARD_ENV, STATUS_MARK};
use crate::report::SuiteDir;

/// Runs the request's scenarios as `req.parallel` shards in child processes.
pub async fn run(req: &Request) -> Result<Exit, HarnessError> {
    let n = req.parallel;
    super::load_all(&crate::scenario::discover(&req.paths))?;
    let docker = crate::docker::connect().await?;
    for spec in [ImageSpec::redis()?, ImageSpec::proxy()?, ImageSpec::store()?] {
        image::ensure(&docker, &spec).await?;
    }
    let work = req.report_dir.join(format!(".parallel-{}", std::process::id()));
    let exe = std::env::current_exe().map_err(HarnessError::io("finding this program to run it in parallel"))?;
    let mut children = Vec::new();
    let mut pumps = Vec::new();
    // On a terminal, one live line per child below the results; elsewhere, prefixed plain lines.
    let board = std::io::IsTerminal::is_terminal(&std::io::stderr()).then(|| Arc::new(Board::new(n)));
    for k in 1..=n {
        let dir = work.join(k.to_string());
        let mut command = tokio::process::Command::new(&exe);
        if board.is_some() {
            command.env(BOARD_ENV, "1");
        }
        let mut child = command
            .arg("run")
            .args(&req.paths)
            .args(["--shard", &format!("{k}/{n}"), "--report-dir"])
            .arg(&dir)
            .args(passed_on(req))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(HarnessError::io(format!("starting {}", exe.display())))?;
        pumps.extend(prefix_output(&mut child, k, n, board.clone()));
        children.push((dir, child));
    }
    let pids: Vec<u32> = children.iter().filter_map(|(_, c)| c.id()).collect();
    let forward = tokio::spawn(async move {
        terminated().await;
        for pid in pids {
            if let Some(p) = rustix::process::Pid::from_raw(pid as i32) {
                let _ = rustix::process::kill_process(p, rustix::process::Signal::TERM);
            }
        }
    });
    let (codes, suites) = wait_all(children).await?;
    forward.abort();
    for p in pumps {
        let _ = p.await;
    }
    if let Some(b) = &board {
        b.finish();
    }
    if codes.contains(&Some(2)) {
        return Ok(Exit::Usage);
    }
    Ok(merge(&req.report_dir, &suites, n, &work))
}

/// The options every child is given (the rest is the parent's).
fn passed_on(req: &Request) -> Vec<String> {
    let mut passed: Vec<String> = Vec::new();
    if let Some(s) = req.seed {
        passed.extend(["--seed".into(), s.to_string()]);
    }
    if req.repeat > 1 {
        passed.extend(["--repeat".into(), req.repeat.to_string()]);
    }
    if let Some(c) = &req.node_cmd {
        passed.extend(["--node-cmd".into(), c.clone()]);
    }
    if let Some(d) = req.max_duration {
        passed.extend(["--max-duration".into(), format!("{}ms", d.as_millis())]);
    }
    passed
}

/// Copies a child's stdout and stderr to ours, each line prefixed (its own `report:` line is the
/// parent's to print); with a board, its status lines go to its line on the board.
fn prefix_output(child: &mut Child, k: u32, n: u32, board: Option<Arc<Board>>) -> Vec<JoinHandle<()>> {
    let streams = [
        child.stdout.take().map(|s| Box::new(s) as Box<dyn AsyncRead + Unpin + Send>),
        child.stderr.take().map(|s| Box::new(s) as Box<dyn AsyncRead + Unpin + Send>),
    ];
    let slot = k.saturating_sub(1) as usize;
    streams
        .into_iter()
        .flatten()
        .map(|stream| {
            let board = board.clone();
            tokio::spawn(async move {
                let mut lines = tokio::io::BufReader::new(stream).lines();
                // Bounded by the child: its pipe closes when it exits.
                while let Ok(Some(line)) = lines.next_line().await {
                    match (&board, line.strip_prefix(STATUS_MARK)) {
                        (_, _) if line.starts_with("report: ") => {}
                        (Some(b), Some(status)) => b.status(slot, status),
                        (Some(b), None) => b.permanent(slot, &line),
                        (None, _) => println!("[{k}/{n}] {line}"),
                    }
                }
                if let Some(b) = &board {
                    b.status(slot, "");
                }
            })
        })
        .collect()
}

/// Each child's exit code, and the suite directories they left.
async fn wait_all(children: Vec<(PathBuf, Child)>) -> Result<(Vec<Option<i32>>, Vec<PathBuf>), HarnessError> {
    let mut codes = Vec::new();
    let mut suites = Vec::new();
    for (dir, mut child) in children {
        codes.push(child.wait().await.map_err(HarnessError::io("waiting for a parallel run"))?.code());
        if let Ok(latest) = std::fs::canonicalize(dir.join("latest")) {
            suites.push(latest);
        }
    }
    Ok((codes, suites))
}

/// One suite of the children's, its tally and verdict printed.
fn merge(report_dir: &Path, suites: &[PathBuf], n: u32, work: &Path) -> Exit {
    let (page, verdict) = match SuiteDir::merge(report_dir, suites) {
        Ok(m) => {
            for d in &m.disagreed {
                eprintln!("warning: {d}: the history's verdict stands");
            }
            (m.page, m.verdict)
        }
        Err(e) => {
            eprintln!("error: cannot merge the parallel runs' suites: {e}");
            return Exit::Inconclusive;
        }
    };
    // Per scenario, what the runs concluded (a soak reads this).
    let merged = std::fs::read(report_dir.join("latest").join("summary.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<leasequake_reports::suite::Suite>(&b).ok());
    if let Some(suite) = merged {
        print!("{}", suite.tally());
    }
    println!(
        "{n} runs in parallel, merged: {} (each run's own suite stays under {})",
        format!("{verdict:?}").to_uppercase(),
        work.display()
    );
    println!("report: {}", page.display());
    verdict.into()
}
