//! `[origin]`: where a scenario of the regression corpus (`scenarios/found/`) came from. An
//! exported simulation finding names its seed, the simulated scenario file and the property it
//! violates; a finding of a lease flaw names the flaw, and the self-test then runs that flaw's node
//! on it (expecting the property) beside the correct node (which must pass). Data only: nothing in
//! it is executed.

use serde::{Deserialize, Serialize};

use crate::check::PROPERTIES;

/// How a found scenario was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// A seed of `leasequake sim`, exported (and usually shrunk).
    Sim,
    /// A failing container run, shrunk or written by hand.
    Run,
    /// An incident in production, written by hand.
    Incident,
}

/// `[origin]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Origin {
    /// How it was found.
    pub source: Source,
    /// The day it was found, `YYYY-MM-DD`.
    pub found: String,
    /// The property it violates (with the flawed lease when `flaw` is given; a correct lease's
    /// finding is declared in `[expected]` as well).
    pub property: String,
    /// The lease flaw it exposes (a name of the self-test's catalogue).
    pub flaw: Option<String>,
    /// The simulated scenario file it was exported from.
    pub scenario: Option<String>,
    /// The simulation seed it was found with.
    pub seed: Option<u64>,
    /// Simulated runs the shrinking took (0: not shrunk).
    #[serde(default)]
    pub shrink_runs: u32,
}

/// The longest flaw name or file path accepted.
const TEXT_MAX: usize = 200;

/// Checks `origin`'s fields; the error is (field, message).
pub fn validate(o: &Origin) -> Result<(), (String, String)> {
    let bad = |field: &str, message: String| Err((format!("origin.{field}"), message));
    if !is_date(&o.found) {
        return bad("found", format!("{:?} is not a date as YYYY-MM-DD", o.found));
    }
    if !PROPERTIES.contains(&o.property.as_str()) {
        return bad("property", format!("`{}` is not a property; one of {}", o.property, PROPERTIES.join(", ")));
    }
    let kebab = |c: char| c.is_ascii_lowercase() || c == '-';
    if let Some(f) = &o.flaw {
        if f.is_empty() || f.len() > TEXT_MAX || !f.chars().all(kebab) {
            return bad("flaw", format!("{f:?} is not a flaw's name (lower-case words joined by '-')"));
        }
    }
    if let Some(file) = &o.scenario {
        if file.is_empty() || file.len() > TEXT_MAX || file.chars().any(char::is_control) {
            return bad("scenario", format!("must be a file's path of 1 to {TEXT_MAX} printable characters"));
        }
    }
    if o.source == Source::Sim && (o.seed.is_none() || o.scenario.is_none()) {
        return bad("seed", "a simulation finding names its seed and its scenario file".into());
    }
    Ok(())
}

/// `YYYY-MM-DD` with a month 1..=12 and a day 1..=31.
fn is_date(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    let number = |p: &str, len: usize| p.len() == len && p.chars().all(|c| c.is_ascii_digit());
    match parts.as_slice() {
        [y, m, d] if number(y, 4) && number(m, 2) && number(d, 2) => {
            matches!(m.parse::<u8>(), Ok(1..=12)) && matches!(d.parse::<u8>(), Ok(1..=31))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin() -> Origin {
        Origin {
            source: Source::Sim,
            found: "2026-12-05".into(),
            property: "bounded_waste".into(),
            flaw: Some("renew-without-owner-compare".into()),
            scenario: Some("scenarios/sim/unfenced.toml".into()),
            seed: Some(263),
            shrink_runs: 12,
        }
    }

    #[test]
    fn an_origin_names_a_real_date_property_and_flaw_and_a_sim_finding_its_seed() {
        assert_eq!(validate(&origin()), Ok(()));
        let field = |o: Origin| validate(&o).unwrap_err().0;
        assert_eq!(field(Origin { found: "2026-13-05".into(), ..origin() }), "origin.found");
        assert_eq!(field(Origin { found: "5.12.2026".into(), ..origin() }), "origin.found");
        assert_eq!(field(Origin { property: "no_stale_writes".into(), ..origin() }), "origin.property");
        assert_eq!(field(Origin { flaw: Some("rm -rf /".into()), ..origin() }), "origin.flaw");
        assert_eq!(field(Origin { seed: None, ..origin() }), "origin.seed");
        assert_eq!(validate(&Origin { seed: None, scenario: None, source: Source::Incident, ..origin() }), Ok(()));
    }
}
