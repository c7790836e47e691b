//! The suite's report directory: one directory per `leasequake run` (named by its UTC start), a
//! run directory per scenario inside it, and the renderers' files beside them (summary.json,
//! junit.xml, summary.md, report.html), each written atomically; `latest` points at the newest.

use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use leasequake_reports::history::HistoryLine;
use leasequake_reports::suite::{ScenarioRun, Suite, SUMMARY_SCHEMA};
use leasequake_reports::Verdict;

use crate::error::HarnessError;
use crate::history::write_atomically;

/// `YYYY-MM-DDTHH:MM:SSZ` for a Unix time (civil-from-days, proleptic Gregorian).
#[must_use]
pub fn utc(unix_s: u64) -> String {
    let days = (unix_s / 86_400) as i64;
    let secs = unix_s % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", secs / 3600, secs % 3600 / 60, secs % 60)
}

/// Today's date (UTC), `YYYY-MM-DD`.
#[must_use]
pub fn today() -> String {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    utc(now).chars().take(10).collect()
}

/// The suite directory this process wrote last (`--json` prints its summary).
static LAST_WRITTEN: std::sync::Mutex<Option<PathBuf>> = std::sync::Mutex::new(None);

/// The suite directory this process wrote last, if any.
#[must_use]
pub fn last_written() -> Option<PathBuf> {
    LAST_WRITTEN.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
}

/// A suite being run: its directory and the scenario runs so far.
#[derive(Debug)]
pub struct SuiteDir {
    root: PathBuf,
    dir: PathBuf,
    started: Instant,
    suite: Suite,
}

impl SuiteDir {
    /// Creates `report_dir/<UTC start>`.
    pub fn create(report_dir: &Path) -> Result<Self, HarnessError> {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let started_utc = utc(now);
        let mut name = started_utc.replace([':', '-'], "").replace('T', "-").trim_end_matches('Z').to_owned();
        if report_dir.join(&name).exists() {
            name = format!("{name}-{}", std::process::id());
        }
        let dir = report_dir.join(&name);
        std::fs::create_dir_all(&dir).map_err(|e| HarnessError::History {
            path: dir.clone(),
            detail: format!("cannot create the report directory: {e} (choose another with --report-dir)"),
        })?;
        let mut versions = std::collections::BTreeMap::new();
        versions.insert("leasequake".to_owned(), env!("CARGO_PKG_VERSION").to_owned());
        // The harness that judged, and the repository it was started from (a run started in
        // another project's checkout records that project's commit, named as the caller's).
        let harness = env!("LEASEQUAKE_COMMIT");
        if !harness.is_empty() {
            versions.insert("harness_commit".to_owned(), harness.to_owned());
        }
        if let Some(commit) = caller_commit() {
            versions.insert("caller_commit".to_owned(), commit);
        }
        let suite = Suite {
            schema: SUMMARY_SCHEMA,
            started_utc,
            took_s: 0.0,
            versions,
            verdict: Verdict::Pass,
            stopped: None,
            scenarios: Vec::new(),
            coverage: None,
        };
        Ok(Self { root: report_dir.to_path_buf(), dir, started: Instant::now(), suite })
    }

    /// The suite directory.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The suite's verdict so far (after `finish`, the one summary.json records).
    #[must_use]
    pub fn verdict(&self) -> Verdict {
        self.suite.verdict
    }

    /// The directory for the next scenario run (`NN-name`).
    #[must_use]
    pub fn next_run_dir(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{:02}-{name}", self.suite.scenarios.len() + 1))
    }

    /// Per scenario, what its runs concluded (`Suite::tally`).
    #[must_use]
    pub fn tally(&self) -> String {
        self.suite.tally()
    }

    /// Sets the suite's coverage (a simulation batch's, over seeds whose histories it did not
    /// keep); otherwise it is read from the runs' histories when the suite is written.
    pub fn set_coverage(&mut self, coverage: leasequake_reports::coverage::Coverage) {
        self.suite.coverage = Some(coverage);
    }

    /// Records a finished scenario run; `versions` seen by the run join the suite's.
    pub fn add(&mut self, run: ScenarioRun, versions: &std::collections::BTreeMap<String, String>) {
        for (k, v) in versions {
            self.suite.versions.entry(k.clone()).or_insert_with(|| v.clone());
        }
        self.suite.verdict = self.suite.verdict.combine(run.verdict());
        self.suite.scenarios.push(run);
    }

    /// Writes summary.json, junit.xml, summary.md and report.html, and points `latest` here.
    /// Returns the report page.
    pub fn finish(&mut self, stopped: Option<String>) -> Result<PathBuf, HarnessError> {
        let took = self.started.elapsed().as_secs_f64();
        self.write(stopped, took)
    }

    fn write(&mut self, stopped: Option<String>, took_s: f64) -> Result<PathBuf, HarnessError> {
        self.suite.took_s = took_s;
        if stopped.is_some() {
            self.suite.verdict = self.suite.verdict.combine(Verdict::Inconclusive);
        }
        self.suite.stopped = stopped;
        let histories: Vec<Option<Vec<HistoryLine>>> = self
            .suite
            .scenarios
            .iter()
            .map(|r| {
                let path = self.dir.join(&r.dir).join(crate::history::HISTORY_FILE);
                (!r.dir.is_empty()).then(|| crate::history::read(&path).ok().map(|(lines, _)| lines)).flatten()
            })
            .collect();
        if self.suite.coverage.is_none() {
            let mut coverage = leasequake_reports::coverage::Coverage::default();
            histories.iter().flatten().for_each(|h| coverage.add(h));
            self.suite.coverage = Some(coverage);
        }
        let json = serde_json::to_vec_pretty(&self.suite)
            .map_err(|e| HarnessError::History { path: self.dir.clone(), detail: e.to_string() })?;
        write_atomically(&self.dir.join("summary.json"), &json)?;
        write_atomically(&self.dir.join("junit.xml"), leasequake_reports::junit::render(&self.suite).as_bytes())?;
        write_atomically(&self.dir.join("summary.md"), leasequake_reports::markdown::render(&self.suite).as_bytes())?;
        let page = self.dir.join("report.html");
        write_atomically(&page, leasequake_reports::html::render(&self.suite, &histories).as_bytes())?;
        self.link_latest();
        *LAST_WRITTEN.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(self.dir.clone());
        Ok(page)
    }

    /// Merges finished suites (directories holding summary.json) into a new suite under
    /// `report_dir`: every run directory is copied in, renumbered in order, judged again from its
    /// history (a summary.json is input, never truth: the verdict is the history's), its repro
    /// pointed at the copy, and the renderers run over the whole. Returns the report page, the
    /// merged verdict, and each run whose summary said other than its history.
    pub fn merge(report_dir: &Path, inputs: &[PathBuf]) -> Result<Merged, HarnessError> {
        let bad = |path: &Path, detail: String| HarnessError::History { path: path.to_path_buf(), detail };
        let mut suites = Vec::new();
        for dir in inputs {
            let path = dir.join("summary.json");
            let text = std::fs::read_to_string(&path)
                .map_err(|e| bad(&path, format!("cannot read it ({e}): is {} a suite directory?", dir.display())))?;
            let suite: Suite = serde_json::from_str(&text).map_err(|e| bad(&path, format!("not a summary: {e}")))?;
            if suite.schema != SUMMARY_SCHEMA {
                return Err(bad(&path, format!("summary schema {} is not {SUMMARY_SCHEMA}", suite.schema)));
            }
            for run in &suite.scenarios {
                for (what, name) in [("run directory", &run.dir), ("scenario name", &run.name)] {
                    if !name.is_empty() && !plain_name(name) {
                        return Err(bad(&path, format!(
                            "its {what} {} is no plain name inside the suite: the summary is damaged or not this suite's (merge only what `leasequake run` wrote)",
                            leasequake_reports::printable(name)
                        )));
                    }
                }
            }
            suites.push((dir, suite));
        }
        let mut merged = Self::create(report_dir)?;
        let mut took: f64 = 0.0;
        let mut stopped = Vec::new();
        let mut disagreed = Vec::new();
        for (dir, suite) in suites {
            took = took.max(suite.took_s);
            if suite.started_utc < merged.suite.started_utc {
                merged.suite.started_utc.clone_from(&suite.started_utc);
            }
            if let Some(why) = suite.stopped {
                stopped.push(format!("{}: {why}", dir.display()));
            }
            for run in suite.scenarios {
                let run = merged.take_run(dir, run, &mut disagreed)?;
                merged.add(run, &suite.versions);
            }
        }
        // The suites ran side by side: the whole took as long as the longest.
        let page = merged.write((!stopped.is_empty()).then(|| stopped.join("; ")), took)?;
        Ok(Merged { page, verdict: merged.suite.verdict, disagreed })
    }

    /// A run of suite `dir`, copied in as this suite's next run and judged again from its history.
    fn take_run(
        &self,
        dir: &Path,
        mut run: ScenarioRun,
        disagreed: &mut Vec<String>,
    ) -> Result<ScenarioRun, HarnessError> {
        // Renumbered, its name as it was (a simulated seed's carries the seed).
        let unnumbered = run.dir.split_once('-').filter(|(n, _)| n.chars().all(|c| c.is_ascii_digit())).map(|(_, r)| r);
        let to = self.next_run_dir(unnumbered.filter(|r| !r.is_empty()).unwrap_or(&run.name));
        let claimed = run.verdict();
        if run.dir.is_empty() {
            if run.result.is_some() {
                run.result = None;
                run.error = Some("summary.json gives a verdict but no run directory to judge it by".into());
            }
        } else {
            let from = dir.join(&run.dir);
            if from.symlink_metadata().map_or(true, |m| !m.is_dir()) {
                return Err(HarnessError::History {
                    path: from,
                    detail: "a run directory that is a link or no directory: runs are copied as they are, never through a link".into(),
                });
            }
            copy_dir(&from, &to)
                .map_err(|e| HarnessError::History { path: to.clone(), detail: format!("cannot copy the run: {e}") })?;
            match crate::history::check_dir(&to) {
                Ok(result) => run.result = Some(result),
                Err(e) if run.result.is_some() => {
                    run.result = None;
                    run.error = Some(format!(
                        "its history cannot be judged ({e}): summary.json's verdict is not taken on trust"
                    ));
                }
                Err(_) => {}
            }
            run.repro = moved_repro(&run.repro, &to);
        }
        run.dir = to.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if run.verdict() != claimed {
            disagreed.push(format!(
                "{}: summary.json said {}, its history judges {}",
                run.dir,
                format!("{claimed:?}").to_uppercase(),
                format!("{:?}", run.verdict()).to_uppercase()
            ));
        }
        Ok(run)
    }

    /// `report_dir/latest` -> this suite (replaced atomically; best effort where symlinks fail).
    fn link_latest(&self) {
        let Some(name) = self.dir.file_name() else { return };
        let tmp = self.root.join(format!(".latest-{}", std::process::id()));
        let _ = std::fs::remove_file(&tmp);
        if std::os::unix::fs::symlink(name, &tmp).is_ok() {
            let _ = std::fs::rename(&tmp, self.root.join("latest"));
        }
    }
}

/// What [`SuiteDir::merge`] wrote.
#[derive(Debug)]
pub struct Merged {
    /// The merged suite's report page.
    pub page: PathBuf,
    /// Its verdict.
    pub verdict: Verdict,
    /// The runs whose summary.json verdict their history did not bear out (the history's stands).
    pub disagreed: Vec<String>,
}

/// A name that stays inside the directory it is joined to: one component, no separator, not `.`
/// or `..`.
fn plain_name(name: &str) -> bool {
    !matches!(name, "." | "..") && !name.contains(['/', '\\', '\0'])
}

/// `repro`, its run directory argument replaced by `to` (the merged copy), the program named as
/// this process is: the rest of the line as it was.
fn moved_repro(repro: &str, to: &Path) -> String {
    let Some(at) = repro.find(" repro ") else { return repro.to_owned() };
    let rest = &repro[at + " repro ".len()..];
    let tail = skip_word(rest);
    format!("{} {tail}", crate::command_line::command(["repro".to_owned(), to.display().to_string()]))
        .trim_end()
        .to_owned()
}

/// `line` after its first shell word (as [`crate::command_line::quoted`] writes one).
fn skip_word(line: &str) -> &str {
    let mut i = 0;
    let b = line.as_bytes();
    while i < b.len() && b[i] != b' ' {
        if b[i] == b'\'' {
            // A quoted run: to its closing quote.
            i += 1;
            while i < b.len() && b[i] != b'\'' {
                i += 1;
            }
        } else if b[i] == b'\\' {
            i += 1;
        }
        i += 1;
    }
    line.get(i..).unwrap_or("").trim_start()
}

/// Copies a run directory (files and subdirectories; symlinks are not followed).
fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        if kind.is_dir() {
            copy_dir(&entry.path(), &to.join(entry.file_name()))?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name()))?;
        }
    }
    Ok(())
}

/// The commit of the git repository the command was started in, if it is in one (the directory
/// `scripts/leasequake` was run from: it runs this program at the checkout's root).
fn caller_commit() -> Option<String> {
    let mut git = std::process::Command::new("git");
    if let Some(dir) = std::env::var_os(crate::command_line::CALLER_DIR_ENV).filter(|d| !d.is_empty()) {
        git.current_dir(dir);
    }
    let out = git.args(["rev-parse", "--short=12", "HEAD"]).stderr(std::process::Stdio::null()).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned()).filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::{moved_repro, plain_name, utc};

    #[test]
    fn a_merged_runs_repro_names_the_copy_and_keeps_the_rest_of_its_line() {
        let to = std::path::Path::new("reports-out/20261207-150000/03-x");
        let p = crate::command_line::program();
        assert_eq!(
            moved_repro("scripts/leasequake repro /w/.parallel-9/1/s/01-x --node-cmd 'nodes/a b/node'", to),
            format!("{p} repro reports-out/20261207-150000/03-x --node-cmd 'nodes/a b/node'")
        );
        assert_eq!(
            moved_repro(r"leasequake repro '/w/it'\''s dir/01-x' --node-cmd n", to),
            format!("{p} repro reports-out/20261207-150000/03-x --node-cmd n")
        );
        assert_eq!(moved_repro("leasequake repro /w/01-x", to), format!("{p} repro reports-out/20261207-150000/03-x"));
        // A line that replays no run directory (a simulated seed's) stays as it is.
        assert_eq!(moved_repro("leasequake sim --seed 1", to), "leasequake sim --seed 1");
    }

    #[test]
    fn only_a_plain_name_stays_inside_the_suite() {
        assert!(plain_name("01-no-faults"));
        for bad in ["..", ".", "../x", "a/b", "/etc", "a\\b", "a\0b"] {
            assert!(!plain_name(bad), "{bad}");
        }
    }

    #[test]
    fn utc_dates_are_civil_dates() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(utc(1_796_256_000 + 3661), "2026-12-03T01:01:01Z");
    }
}
