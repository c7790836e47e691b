//! The self-test (`leasequake selftest`): every known-bad variant in the catalogue runs on the
//! scenario that should expose it, beside a control (the same kind of run with the correct
//! implementation) that must pass. A harness whose checks never fail proves nothing; this measures
//! how often they fail when they must (docs/detection.md).
//!
//! A variant is written out as a scenario file of its own (the entry's scenario with its changes:
//! the flawed node as the node command, the store's policy, the checkpoints), so its run directory
//! holds exactly what ran and `leasequake repro` replays it.

mod found;
mod run;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use leasequake_reports::suite::ScenarioRun;
use leasequake_reports::{PropertyStatus, Verdict};
use serde::Serialize;

use crate::error::HarnessError;

pub use found::{found, FOUND_DIR};
pub use run::{run, Request};

/// What kind of defect an entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A flaw of the `lease` crate, run by the self-test node build against an unfenced store
    /// (fencing would mask it).
    LeaseFlaw,
    /// A configuration of the correct code that is known to be unsafe or wasteful.
    ConfigHazard,
    /// A bug in the store's fencing, so that the fencing checks themselves are shown to fail.
    StoreFlaw,
    /// A lease flaw's finding kept in the regression corpus (`scenarios/found/`, its `[origin]`
    /// names the flaw): the flawed node on the found schedule, the correct node as its control.
    Found,
}

/// One catalogue entry.
#[derive(Debug, Clone, Copy)]
pub struct Entry {
    /// Stable name (a lease flaw's name is the flaw's).
    pub name: &'static str,
    /// Its kind.
    pub kind: Kind,
    /// The scenario that should expose it (relative to the checkout).
    pub scenario: &'static str,
    /// Run the self-test node with this flaw (`node --flaw NAME`).
    pub flaw: Option<&'static str>,
    /// Override the store's policy.
    pub store_policy: Option<&'static str>,
    /// Override the checkpoints that run the owner check.
    pub checkpoints: Option<&'static [u8]>,
    /// The control: this scenario, unchanged, must pass.
    pub control: &'static str,
    /// Declared: no property can catch it, and why. Shown as a gap, never hidden.
    pub gap: Option<&'static str>,
    /// The property that must catch it. The variant declares it as its expected failure (any
    /// other violation allowed too), so its run reads XFAIL when caught and FAIL when missed.
    pub expect: Option<&'static str>,
}

const fn lease_flaw(name: &'static str, scenario: &'static str, expect: &'static str) -> Entry {
    Entry {
        name,
        kind: Kind::LeaseFlaw,
        scenario,
        flaw: Some(name),
        store_policy: None,
        checkpoints: None,
        control: scenario,
        gap: None,
        expect: Some(expect),
    }
}

/// The catalogue, in report order.
pub const CATALOGUE: [Entry; 12] = [
    lease_flaw(
        "renew-without-owner-compare",
        "scenarios/selftest/key-lost-sparse-checks-unfenced.toml",
        "bounded_waste",
    ),
    lease_flaw(
        "release-without-owner-compare",
        "scenarios/selftest/paused-before-embedding-unfenced.toml",
        "bounded_waste",
    ),
    lease_flaw("non-sticky-loss", "scenarios/selftest/redis-blips-sparse-checks-unfenced.toml", "sticky_loss"),
    lease_flaw("acquire-without-nx", "scenarios/selftest/contention-unfenced.toml", "liveness"),
    lease_flaw("renew-interval-equals-ttl", "scenarios/selftest/contention-unfenced.toml", "liveness"),
    lease_flaw("renewal-errors-ignored", "scenarios/selftest/renewal-stalled-unfenced.toml", "bounded_waste"),
    lease_flaw(
        "renewal-stops-after-reconnect",
        "scenarios/selftest/redis-blip-after-acquire-unfenced.toml",
        "keeps_renewing",
    ),
    lease_flaw(
        "validity-from-reply",
        "scenarios/selftest/renewal-stalled-slow-replies-unfenced.toml",
        "within_validity",
    ),
    lease_flaw("no-local-deadline", "scenarios/selftest/renewal-stalled-slow-replies-unfenced.toml", "within_validity"),
    Entry {
        name: "checkpoints-only-before-persist",
        kind: Kind::ConfigHazard,
        scenario: "scenarios/selftest/key-lost-mid-round.toml",
        flaw: None,
        store_policy: None,
        checkpoints: Some(&[7]),
        control: "scenarios/selftest/key-lost-mid-round.toml",
        gap: None,
        expect: Some("bounded_waste"),
    },
    Entry {
        name: "seed-config-no-fencing",
        kind: Kind::ConfigHazard,
        scenario: "scenarios/hazards/seed-config-paused-after-checkpoint-7.toml",
        flaw: None,
        store_policy: None,
        checkpoints: None,
        control: "scenarios/nightly/owner-paused-after-checkpoint-7.toml",
        gap: None,
        expect: Some("no_stale_write"),
    },
    Entry {
        name: "store-fencing-skips-persist",
        kind: Kind::StoreFlaw,
        scenario: "scenarios/nightly/owner-paused-after-checkpoint-7.toml",
        flaw: None,
        store_policy: Some("flawed_skips_persist"),
        checkpoints: None,
        control: "scenarios/nightly/owner-paused-after-checkpoint-7.toml",
        gap: None,
        expect: Some("no_stale_write"),
    },
];

/// The entries of `all` named in `only` (all when empty); an unknown name is an error naming the
/// known ones.
pub fn select(all: &[Entry], only: &[String]) -> Result<Vec<Entry>, String> {
    if let Some(bad) = only.iter().find(|n| !all.iter().any(|e| e.name == n.as_str())) {
        let known: Vec<&str> = all.iter().map(|e| e.name).collect();
        return Err(format!("no catalogue entry {bad:?}; the entries are: {}", known.join(", ")));
    }
    Ok(all.iter().filter(|e| only.is_empty() || only.iter().any(|n| n == e.name)).copied().collect())
}

/// Writes the entry's variant of its scenario into `dir` and returns the file: the scenario's
/// text with the entry's changes, named `<scenario>--<entry>`, with a comment saying where it came
/// from. The flawed node is `flawed_node node --flaw NAME`.
pub fn write_variant(root: &Path, e: &Entry, flawed_node: &Path, dir: &Path) -> Result<PathBuf, HarnessError> {
    let source = root.join(e.scenario);
    let io = |what: &str, p: &Path, err: std::io::Error| HarnessError::Environment {
        detail: format!("cannot {what} {}: {err}", p.display()),
    };
    let text = std::fs::read_to_string(&source).map_err(|err| io("read", &source, err))?;
    let mut doc: toml::Table = toml::from_str(&text)
        .map_err(|err| HarnessError::Environment { detail: format!("{}: {err}", source.display()) })?;
    let name = doc.get("name").and_then(|v| v.as_str()).unwrap_or("scenario").to_owned();
    // A found entry is named after its file already: its variant is that file's flawed run.
    let suffix = if e.kind == Kind::Found { "flawed" } else { e.name };
    doc.insert("name".into(), format!("{name}--{suffix}").into());
    let table = |doc: &mut toml::Table, key: &str| -> toml::Table {
        doc.get(key).and_then(|v| v.as_table()).cloned().unwrap_or_default()
    };
    if let Some(flaw) = e.flaw {
        let mut nodes = table(&mut doc, "nodes");
        let cmd = vec![flawed_node.display().to_string(), "node".into(), "--flaw".into(), flaw.to_owned()];
        nodes.insert("command".into(), cmd.into());
        doc.insert("nodes".into(), nodes.into());
    }
    if let Some(policy) = e.store_policy {
        let mut store = table(&mut doc, "store");
        store.insert("policy".into(), policy.into());
        doc.insert("store".into(), store.into());
    }
    if let Some(property) = e.expect {
        let mut expected = toml::Table::new();
        expected.insert("property".into(), property.into());
        expected.insert(
            "why".into(),
            format!("self-test: the {} entry `{}` must be caught", kind_name(e.kind), e.name).into(),
        );
        let also: Vec<toml::Value> =
            crate::check::PROPERTIES.iter().filter(|p| **p != property).map(|p| toml::Value::from(*p)).collect();
        expected.insert("also".into(), also.into());
        doc.insert("expected".into(), expected.into());
    }
    if let Some(cps) = e.checkpoints {
        let mut pipeline = table(&mut doc, "pipeline");
        pipeline.insert("checkpoints".into(), cps.iter().map(|c| i64::from(*c)).collect::<Vec<_>>().into());
        doc.insert("pipeline".into(), pipeline.into());
    }
    let body = toml::to_string(&doc)
        .map_err(|err| HarnessError::Environment { detail: format!("cannot write the variant of {name}: {err}") })?;
    std::fs::create_dir_all(dir).map_err(|err| io("create", dir, err))?;
    let file = dir.join(format!("{name}--{suffix}.toml"));
    let header = format!(
        "# Written by `leasequake selftest`: {} with catalogue entry `{}` ({:?}).\n",
        e.scenario, e.name, e.kind
    );
    std::fs::write(&file, header + &body).map_err(|err| io("write", &file, err))?;
    Ok(file)
}

fn kind_name(k: Kind) -> &'static str {
    match k {
        Kind::LeaseFlaw => "lease flaw",
        Kind::ConfigHazard => "configuration hazard",
        Kind::StoreFlaw => "store flaw",
        Kind::Found => "found lease flaw",
    }
}

/// What one run of a variant showed.
#[derive(Debug, Clone, Serialize)]
pub struct Caught {
    /// The run directory (inside the suite).
    pub dir: String,
    /// The seed.
    pub seed: u64,
    /// The run was inconclusive (or never ran): it counts neither way.
    pub inconclusive: bool,
    /// The properties that were violated.
    pub by: Vec<String>,
    /// From the start of the run to the first violation, ms.
    pub first_violation_ms: Option<u64>,
}

impl Caught {
    /// Reads what `run` showed; `suite_dir` holds its run directory.
    #[must_use]
    pub fn of(run: &ScenarioRun, suite_dir: &Path) -> Self {
        let mut c =
            Caught { dir: run.dir.clone(), seed: run.seed, inconclusive: true, by: vec![], first_violation_ms: None };
        let Some(r) = &run.result else { return c };
        c.by = r.properties.iter().filter(|p| p.status == PropertyStatus::Violated).map(|p| p.name.clone()).collect();
        c.inconclusive = c.by.is_empty() && r.verdict == Verdict::Inconclusive;
        let started = started_ns(&suite_dir.join(&run.dir));
        let first = r
            .properties
            .iter()
            .filter(|p| p.status == PropertyStatus::Violated)
            .flat_map(|p| p.violations.iter().map(|v| v.at_ns))
            .min();
        c.first_violation_ms = first.zip(started).map(|(v, s)| v.saturating_sub(s) / 1_000_000);
        c
    }
    /// Caught: the entry's property was violated (any property, for an entry without one).
    #[must_use]
    pub fn caught_by(&self, expect: Option<&str>) -> bool {
        match expect {
            Some(p) => self.by.iter().any(|b| b == p),
            None => !self.by.is_empty(),
        }
    }
}

/// The run's start, from its history's first line (the header) alone: a history can be large.
fn started_ns(run_dir: &Path) -> Option<u64> {
    crate::history::read_header(&run_dir.join(crate::history::HISTORY_FILE)).ok().flatten().map(|h| h.started_ns)
}

/// An entry's row of the table.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The entry.
    pub entry: String,
    /// Its kind.
    pub kind: Kind,
    /// The scenario it ran on.
    pub scenario: String,
    /// CAUGHT, MISSED, GAP (declared and missed), INCONCLUSIVE.
    pub status: String,
    /// Runs that caught it.
    pub caught: usize,
    /// Conclusive runs.
    pub conclusive: usize,
    /// Runs in all.
    pub runs: usize,
    /// Which properties caught it, with how many runs each.
    pub by: BTreeMap<String, usize>,
    /// Median time to the first violation, ms, over the runs that caught it.
    pub median_first_violation_ms: Option<u64>,
    /// The control's scenario.
    pub control: String,
    /// PASS, FAIL or INCONCLUSIVE over the control's runs.
    pub control_status: String,
    /// Control runs that passed, of all its runs.
    pub control_passed: usize,
    /// Control runs.
    pub control_runs: usize,
    /// A declared gap's reason.
    pub gap: Option<String>,
    /// Every run.
    pub details: Vec<Caught>,
}

/// The detection goal: caught in at least 9 of 10 conclusive runs (caught by luck is not caught).
#[must_use]
pub fn detected(caught: usize, conclusive: usize) -> bool {
    conclusive > 0 && caught * 10 >= conclusive * 9
}

/// Builds an entry's row from its runs and its control's runs.
#[must_use]
pub fn row(e: &Entry, runs: Vec<Caught>, control: &[&ScenarioRun]) -> Row {
    let conclusive = runs.iter().filter(|c| !c.inconclusive).count();
    let caught = runs.iter().filter(|c| c.caught_by(e.expect)).count();
    let mut by = BTreeMap::new();
    for p in runs.iter().flat_map(|c| c.by.iter()) {
        *by.entry(p.clone()).or_insert(0) += 1;
    }
    let mut firsts: Vec<u64> = runs.iter().filter_map(|c| c.first_violation_ms).collect();
    firsts.sort_unstable();
    let status = match (detected(caught, conclusive), e.gap.is_some(), conclusive) {
        (_, _, 0) => "INCONCLUSIVE",
        (true, _, _) => "CAUGHT",
        (false, true, _) => "GAP",
        (false, false, _) => "MISSED",
    };
    let control_passed = control.iter().filter(|r| r.verdict() == Verdict::Pass).count();
    let control_failed = control.iter().filter(|r| r.verdict() == Verdict::Fail).count();
    let control_status = if control_failed > 0 {
        "FAIL"
    } else if control_passed == control.len() && !control.is_empty() {
        "PASS"
    } else {
        "INCONCLUSIVE"
    };
    Row {
        entry: e.name.into(),
        kind: e.kind,
        scenario: e.scenario.into(),
        status: status.into(),
        caught,
        conclusive,
        runs: runs.len(),
        by,
        median_first_violation_ms: firsts.get(firsts.len() / 2).copied(),
        control: e.control.into(),
        control_status: control_status.into(),
        control_passed,
        control_runs: control.len(),
        gap: e.gap.map(str::to_owned),
        details: runs,
    }
}

/// The exit code of a self-test: 0 every entry caught and every control passed; 1 an entry
/// missed (a declared gap included: declared is not caught) or a control failed; 3 otherwise
/// inconclusive.
#[must_use]
pub fn exit_code(rows: &[Row]) -> u8 {
    let failed = rows.iter().any(|r| matches!(r.status.as_str(), "MISSED" | "GAP") || r.control_status == "FAIL");
    let unsure = rows.iter().any(|r| r.status == "INCONCLUSIVE" || r.control_status == "INCONCLUSIVE");
    match (failed, unsure) {
        (true, _) => 1,
        (false, true) => 3,
        (false, false) => 0,
    }
}

/// The table as Markdown (also what the terminal shows).
#[must_use]
pub fn markdown(rows: &[Row], seeds: &[u64]) -> String {
    let mut out = String::new();
    let seeds_text = match seeds {
        [one] => format!("seed {one}"),
        [first, .., last] => format!("{} seeds ({first}..={last})", seeds.len()),
        [] => "no seeds".into(),
    };
    out.push_str(&format!("Self-test over {seeds_text}: goal >= 9/10 of conclusive runs caught.\n\n"));
    out.push_str("| entry | kind | result | rate | caught by | first violation (median) | control |\n");
    out.push_str("|---|---|---|---|---|---|---|\n");
    for r in rows {
        let by: Vec<String> = r.by.iter().map(|(p, n)| format!("{p} ({n})")).collect();
        let scenario = Path::new(&r.scenario).file_stem().map_or(String::new(), |s| s.to_string_lossy().into_owned());
        out.push_str(&format!(
            "| {} | {} | {} | {}/{} | {} | {} | {} {}/{} |\n",
            r.entry,
            serde_json::to_value(r.kind).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default(),
            r.status,
            r.caught,
            r.conclusive,
            if by.is_empty() { "-".into() } else { format!("{scenario}: {}", by.join(", ")) },
            r.median_first_violation_ms.map_or("-".into(), |ms| format!("{:.1} s", ms as f64 / 1000.0)),
            r.control_status,
            r.control_passed,
            r.control_runs,
        ));
    }
    let gaps: Vec<&Row> = rows.iter().filter(|r| r.gap.is_some()).collect();
    if !gaps.is_empty() {
        out.push_str("\nDeclared gaps (no property can catch them, and why):\n");
        for r in gaps {
            out.push_str(&format!("- {}: {}\n", r.entry, r.gap.as_deref().unwrap_or("")));
        }
    }
    out
}

/// The distinct controls of `entries`, in catalogue order.
#[must_use]
pub fn controls(entries: &[Entry]) -> Vec<&'static str> {
    let mut seen = BTreeSet::new();
    entries.iter().map(|e| e.control).filter(|c| seen.insert(*c)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_s_start_is_read_from_its_header_line_alone() {
        let dir = std::env::temp_dir().join(format!("leasequake-started-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let header = r#"{"kind":"header","version":1,"run_id":"r","scenario":"s","seed":1,"tenant":"t","policy":"enforce","fence_source":"store","expected":null,"liveness_bound_ms":1,"node_silence_ms":1,"observer_gap_ms":1,"started_ns":4242}"#;
        // The line after the header is not even JSON: only the header is read.
        std::fs::write(dir.join("history.jsonl"), format!("{header}\nnot json\n")).unwrap();
        assert_eq!(started_ns(&dir), Some(4242));
        std::fs::write(dir.join("history.jsonl"), "not json\n").unwrap();
        assert_eq!(started_ns(&dir), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn every_lease_flaw_is_in_the_catalogue_once_and_every_scenario_exists() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let flaws: Vec<&str> = CATALOGUE.iter().filter_map(|e| e.flaw).collect();
        for name in [
            "renew-without-owner-compare",
            "release-without-owner-compare",
            "non-sticky-loss",
            "acquire-without-nx",
            "renew-interval-equals-ttl",
            "renewal-errors-ignored",
            "renewal-stops-after-reconnect",
        ] {
            assert_eq!(flaws.iter().filter(|f| **f == name).count(), 1, "{name}");
        }
        for e in CATALOGUE {
            for s in [e.scenario, e.control] {
                crate::scenario::load(&root.join(s)).unwrap_or_else(|err| panic!("{}: {err}", e.name));
            }
        }
    }

    #[test]
    fn a_variant_is_its_scenario_with_the_entry_s_changes_and_loads() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let dir = std::env::temp_dir().join(format!("lq-variant-{}", std::process::id()));
        let e = CATALOGUE.iter().find(|e| e.name == "checkpoints-only-before-persist").unwrap();
        let file = write_variant(&root, e, Path::new("/x/flawed"), &dir).unwrap();
        let s = crate::scenario::load(&file).unwrap();
        assert_eq!(s.name, "key-lost-mid-round--checkpoints-only-before-persist");
        assert_eq!(s.pipeline.checkpoints, vec![7]);
        assert_eq!(s.nodes.command, None);
        let expected = s.expected.unwrap();
        assert_eq!(expected.property, "bounded_waste");
        assert!(expected.also.contains(&"no_stale_write".to_owned()) && !expected.also.contains(&expected.property));
        let e = CATALOGUE.iter().find(|e| e.name == "non-sticky-loss").unwrap();
        let s = crate::scenario::load(&write_variant(&root, e, Path::new("/x/flawed"), &dir).unwrap()).unwrap();
        assert_eq!(s.nodes.command.unwrap(), ["/x/flawed", "node", "--flaw", "non-sticky-loss"]);
        let e = CATALOGUE.iter().find(|e| e.name == "store-fencing-skips-persist").unwrap();
        let s = crate::scenario::load(&write_variant(&root, e, Path::new("/x/flawed"), &dir).unwrap()).unwrap();
        assert_eq!(s.store.policy, leasequake_reports::history::StorePolicy::FlawedSkipsPersist);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_entry_is_caught_at_nine_in_ten_and_a_miss_or_a_failed_control_fails_the_self_test() {
        assert!(detected(9, 10) && detected(1, 1) && !detected(8, 10) && !detected(0, 0));
        let e = CATALOGUE[0];
        let caught = |n: usize, of: usize| {
            (0..of)
                .map(|i| Caught {
                    dir: String::new(),
                    seed: i as u64,
                    inconclusive: false,
                    by: if i < n { vec!["bounded_waste".into()] } else { vec![] },
                    first_violation_ms: Some(100),
                })
                .collect::<Vec<_>>()
        };
        let good = row(&e, caught(10, 10), &[]);
        assert_eq!((good.status.as_str(), good.control_status.as_str()), ("CAUGHT", "INCONCLUSIVE"));
        assert_eq!(exit_code(&[good]), 3);
        let missed = row(&e, caught(8, 10), &[]);
        assert_eq!(missed.status, "MISSED");
        // Caught by another property than the entry's is not caught.
        let mut other = caught(10, 10);
        for c in &mut other {
            c.by = vec!["liveness".into()];
        }
        assert_eq!(row(&e, other, &[]).status, "MISSED");
        assert_eq!(exit_code(&[missed]), 1);
        let declared = Entry { gap: Some("no property can see it"), expect: None, ..CATALOGUE[6] };
        let gap = row(&declared, caught(0, 3), &[]);
        assert_eq!(gap.status, "GAP");
        assert!(markdown(std::slice::from_ref(&gap), &[1, 2, 3]).contains("Declared gaps"));
        assert_eq!(exit_code(&[gap]), 1, "a declared gap is shown with its reason, and is not caught");
    }
}
