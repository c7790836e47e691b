//! The regression corpus's lease-flaw findings as self-test entries: each scenario of
//! `scenarios/found/` whose `[origin]` names a flaw runs the flawed node (expecting the origin's
//! property) beside the file unchanged with the correct node (which must pass).

use std::path::Path;

use super::{Entry, Kind, CATALOGUE};
use crate::error::HarnessError;

/// The regression corpus, relative to the checkout.
pub const FOUND_DIR: &str = "scenarios/found";

/// At most this many found scenarios are read (a corpus is curated, not a dump).
const FOUND_MAX: usize = 64;

/// The found entries under `root`'s corpus, in file-name order (none when it has no corpus).
///
/// # Errors
/// A corpus file does not load, names a flaw the catalogue does not know, is named like a
/// catalogue entry, or the corpus holds more than [`FOUND_MAX`] files.
pub fn found(root: &Path) -> Result<Vec<Entry>, HarnessError> {
    let dir = root.join(FOUND_DIR);
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let files = crate::scenario::discover(std::slice::from_ref(&dir));
    if files.len() > FOUND_MAX {
        return Err(HarnessError::usage(format!(
            "{} holds {} scenarios; the self-test reads at most {FOUND_MAX}: keep the corpus curated",
            dir.display(),
            files.len()
        )));
    }
    let mut entries = Vec::new();
    for file in files {
        let s = crate::scenario::load(&file).map_err(|e| HarnessError::usage(e.to_string()))?;
        let Some((flaw, property)) = s.origin.as_ref().and_then(|o| Some((o.flaw.clone()?, o.property.clone()))) else {
            continue;
        };
        if !CATALOGUE.iter().any(|e| e.flaw == Some(flaw.as_str())) {
            return Err(HarnessError::usage(format!(
                "{}: `origin.flaw`: {flaw:?} is not a lease flaw of the self-test's catalogue",
                file.display()
            )));
        }
        if CATALOGUE.iter().any(|e| e.name == s.name) {
            return Err(HarnessError::usage(format!(
                "{}: named like the catalogue entry {:?}: rename it",
                file.display(),
                s.name
            )));
        }
        let relative = file.strip_prefix(root).unwrap_or(&file).display().to_string();
        entries.push(entry(s.name, relative, flaw, property));
    }
    Ok(entries)
}

/// A found entry. Entries are `'static` (the catalogue is a constant); the few strings of a found
/// one are leaked once per process, bounded by [`FOUND_MAX`].
fn entry(name: String, scenario: String, flaw: String, property: String) -> Entry {
    let scenario: &'static str = Box::leak(scenario.into_boxed_str());
    Entry {
        name: Box::leak(name.into_boxed_str()),
        kind: Kind::Found,
        scenario,
        flaw: Some(Box::leak(flaw.into_boxed_str())),
        store_policy: None,
        checkpoints: None,
        control: scenario,
        gap: None,
        expect: Some(Box::leak(property.into_boxed_str())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_corpus_s_flaw_findings_are_entries_with_their_file_as_control_and_a_bad_flaw_is_refused() {
        let root = std::env::temp_dir().join(format!("lq-found-{}", std::process::id()));
        let dir = root.join(FOUND_DIR);
        std::fs::create_dir_all(&dir).unwrap();
        let text = |name: &str, flaw: &str| {
            format!(
                "name = \"{name}\"\ndescription = \"d\"\nincident = \"i\"\nduration_s = 20\n[nodes]\ncount = 2\n\
                 [lease]\nttl_ms = 1500\n[store]\npolicy = \"observe\"\nfence_source = \"store\"\n\
                 [origin]\nsource = \"sim\"\nfound = \"2026-12-05\"\nproperty = \"sticky_loss\"\n{flaw}\
                 scenario = \"scenarios/sim/unfenced.toml\"\nseed = 2\n"
            )
        };
        assert!(found(&root).unwrap().is_empty());
        std::fs::write(dir.join("a.toml"), text("a", "flaw = \"non-sticky-loss\"\n")).unwrap();
        std::fs::write(dir.join("b.toml"), text("b", "")).unwrap();
        let entries = found(&root).unwrap();
        assert_eq!(entries.len(), 1, "a finding of the correct lease is no self-test entry");
        let e = entries[0];
        assert_eq!(
            (e.name, e.kind, e.flaw, e.expect),
            ("a", Kind::Found, Some("non-sticky-loss"), Some("sticky_loss"))
        );
        assert_eq!((e.scenario, e.control), ("scenarios/found/a.toml", "scenarios/found/a.toml"));
        let variant = super::super::write_variant(&root, &e, Path::new("/x/flawed"), &root.join("v")).unwrap();
        let s = crate::scenario::load(&variant).unwrap();
        assert_eq!(s.name, "a--flawed");
        assert_eq!(s.nodes.command.unwrap(), ["/x/flawed", "node", "--flaw", "non-sticky-loss"]);
        assert_eq!(s.expected.unwrap().property, "sticky_loss");
        std::fs::write(dir.join("c.toml"), text("c", "flaw = \"no-such-flaw\"\n")).unwrap();
        assert!(found(&root).unwrap_err().to_string().contains("no-such-flaw"));
        std::fs::remove_dir_all(&root).unwrap();
    }
}
