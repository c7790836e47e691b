//! A suite run: what `summary.json` holds (versioned), and what every renderer reads.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::history::ExpectedFailure;
use crate::{CheckResult, Expectation, PropertyStatus, Verdict};

/// The version of `summary.json`'s schema; bumped on any incompatible change.
pub const SUMMARY_SCHEMA: u32 = 1;

/// One suite run (`leasequake run` over one or more scenarios).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Suite {
    /// [`SUMMARY_SCHEMA`].
    pub schema: u32,
    /// When it started, UTC, `YYYY-MM-DDTHH:MM:SSZ`.
    pub started_utc: String,
    /// Wall time of the whole suite, seconds.
    pub took_s: f64,
    /// Versions: harness, harness commit, Redis, Docker engine (what could be read).
    pub versions: BTreeMap<String, String>,
    /// The verdict of the whole (failure wins over inconclusive, which wins over pass).
    pub verdict: Verdict,
    /// Why the suite stopped early, if it did.
    pub stopped: Option<String>,
    /// Every scenario run, in the order run.
    pub scenarios: Vec<ScenarioRun>,
    /// Which fault cells the runs exercised (`coverage`): a container suite's over its runs, a
    /// simulation batch's over every seed it ran (absent in older summaries).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage: Option<crate::coverage::Coverage>,
}

/// One scenario run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScenarioRun {
    /// Scenario name.
    pub name: String,
    /// The scenario file as given.
    pub file: String,
    /// Its one-line description.
    pub description: String,
    /// The seed used.
    pub seed: u64,
    /// The run directory, relative to the suite directory.
    pub dir: String,
    /// Wall time, seconds.
    pub took_s: f64,
    /// The scenario's configuration, as run (the parsed file).
    pub config: BTreeMap<String, String>,
    /// A declared expected failure.
    pub expected: Option<ExpectedFailure>,
    /// The checker's result; `None` when the run could not even start (see `error`).
    pub result: Option<CheckResult>,
    /// Why the run could not start or finish (environment trouble): inconclusive.
    pub error: Option<String>,
    /// The command that replays it exactly (`leasequake repro RUN_DIR`: the schedule as
    /// executed, the same nodes), as the person who started the run would type it.
    pub repro: String,
    /// The command that runs its scenario file again with the same seed (a random schedule is
    /// drawn again; timings differ), second to `repro`. Empty where there is no file.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub rerun: String,
    /// How far the run went past its `duration_s`, ms, because the last fault healed late (the
    /// history's snapshot says the same). Absent when it ended as planned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extended_ms: Option<u64>,
}

/// How a scenario run is shown: a pass, an expected failure observed, a failure, inconclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Shown {
    /// A check failed (or an expected failure did not happen).
    Fail,
    /// The environment broke or the history has a hole.
    Inconclusive,
    /// A declared expected failure, observed.
    ExpectedFail,
    /// Every property held.
    Pass,
}

impl Shown {
    /// The label: `FAIL`, `INCONCLUSIVE`, `XFAIL`, `PASS`.
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            Shown::Fail => "FAIL",
            Shown::Inconclusive => "INCONCLUSIVE",
            Shown::ExpectedFail => "XFAIL",
            Shown::Pass => "PASS",
        }
    }
}

impl ScenarioRun {
    /// The verdict of this run.
    #[must_use]
    pub fn verdict(&self) -> Verdict {
        self.result.as_ref().map_or(Verdict::Inconclusive, |r| r.verdict)
    }

    /// How it is shown.
    #[must_use]
    pub fn shown(&self) -> Shown {
        match (&self.result, self.verdict()) {
            (_, Verdict::Fail) => Shown::Fail,
            (_, Verdict::Inconclusive) => Shown::Inconclusive,
            (Some(r), Verdict::Pass) if r.expectation == Some(Expectation::ExpectedFailureObserved) => {
                Shown::ExpectedFail
            }
            _ => Shown::Pass,
        }
    }

    /// Why the run lasted longer than its scenario says, if it did.
    #[must_use]
    pub fn extension(&self) -> Option<String> {
        self.extended_ms.map(|ms| {
            format!(
                "went on {:.1} s past its duration_s: the last fault healed late, so liveness was judged up to its \
                 bound after the heal",
                ms as f64 / 1000.0
            )
        })
    }

    /// One line: the first violation, the first reason for inconclusive, or what held.
    #[must_use]
    pub fn finding(&self) -> String {
        let Some(r) = &self.result else { return self.error.clone().unwrap_or_default() };
        // An inconclusive run says why first: a violation on a damaged history or a drifted
        // environment is not what it concluded.
        if r.verdict == Verdict::Inconclusive {
            if let Some(why) = r.inconclusive.first() {
                return why.clone();
            }
        }
        if let Some(p) = r.properties.iter().find(|p| p.status == PropertyStatus::Violated) {
            let expected = self.expected.as_ref().is_some_and(|e| e.property == p.name);
            return format!("{}: {}{}", p.name, p.sentence, if expected { " (expected)" } else { "" });
        }
        if r.expectation == Some(Expectation::ExpectedFailureMissing) {
            if let Some(e) = &self.expected {
                return format!("expected {} to be violated, and it held: {}", e.property, e.why);
            }
        }
        r.inconclusive.first().cloned().unwrap_or_else(|| "every property held".into())
    }
}

impl Suite {
    /// Per scenario, in the order first run: how many runs were PASS, FAIL, XFAIL and
    /// INCONCLUSIVE, and for every run that was not PASS its seed and the first line of why (a
    /// false-verdict soak reads this). Indented, under the runs' own lines. Text from histories is
    /// escaped.
    #[must_use]
    pub fn tally(&self) -> String {
        use std::fmt::Write;
        let mut order: Vec<&str> = Vec::new();
        for r in &self.scenarios {
            if !order.contains(&r.name.as_str()) {
                order.push(&r.name);
            }
        }
        let mut out = String::new();
        for name in order {
            let runs: Vec<&ScenarioRun> = self.scenarios.iter().filter(|r| r.name == name).collect();
            let n = |s: Shown| runs.iter().filter(|r| r.shown() == s).count();
            let _ = writeln!(
                out,
                "  {name:<44} PASS {:>3}  FAIL {:>3}  XFAIL {:>3}  INCONCLUSIVE {:>3}",
                n(Shown::Pass),
                n(Shown::Fail),
                n(Shown::ExpectedFail),
                n(Shown::Inconclusive)
            );
            for r in runs.iter().filter(|r| r.shown() != Shown::Pass) {
                let why = r.finding();
                let first = why.lines().next().unwrap_or_default();
                let _ = writeln!(out, "      {:<12} seed {:<20} {}", r.shown().label(), r.seed, crate::escaped(first));
            }
        }
        let all = format!("all {} runs", self.scenarios.len());
        let _ = writeln!(
            out,
            "  {all:<44} PASS {:>3}  FAIL {:>3}  XFAIL {:>3}  INCONCLUSIVE {:>3}",
            self.count(Shown::Pass),
            self.count(Shown::Fail),
            self.count(Shown::ExpectedFail),
            self.count(Shown::Inconclusive)
        );
        out
    }

    /// Runs shown as `s`.
    #[must_use]
    pub fn count(&self, s: Shown) -> usize {
        self.scenarios.iter().filter(|r| r.shown() == s).count()
    }

    /// Indices of the runs, failures first, then inconclusive, expected failures, passes.
    #[must_use]
    pub fn order(&self) -> Vec<usize> {
        let mut idx: Vec<usize> = (0..self.scenarios.len()).collect();
        idx.sort_by_key(|&i| (self.scenarios[i].shown(), i));
        idx
    }
}
