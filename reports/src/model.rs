//! The verdict of a run, and the exit code each verdict maps to.

use serde::{Deserialize, Serialize};

/// What a run proved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Every property held, every fault was verified in effect, the history is complete.
    Pass,
    /// A property was violated.
    Fail,
    /// The environment broke and nothing was proven. Never a pass.
    Inconclusive,
}

impl Verdict {
    /// The process exit code: 0 pass, 1 fail, 3 inconclusive (2 is kept for usage errors).
    #[must_use]
    pub fn exit_code(self) -> i32 {
        match self {
            Verdict::Pass => 0,
            Verdict::Fail => 1,
            Verdict::Inconclusive => 3,
        }
    }

    /// Combines verdicts of several runs: a failure wins over inconclusive, which wins over pass.
    #[must_use]
    pub fn combine(self, other: Verdict) -> Verdict {
        use Verdict::{Fail, Inconclusive, Pass};
        match (self, other) {
            (Fail, _) | (_, Fail) => Fail,
            (Inconclusive, _) | (_, Inconclusive) => Inconclusive,
            (Pass, Pass) => Pass,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Verdict::{Fail, Inconclusive, Pass};

    #[test]
    fn failure_wins_over_inconclusive_which_wins_over_pass() {
        assert_eq!(Pass.combine(Inconclusive), Inconclusive);
        assert_eq!(Inconclusive.combine(Fail), Fail);
        assert_eq!(Pass.combine(Pass), Pass);
        assert_eq!([Pass, Fail, Inconclusive].map(|v| v.exit_code()), [0, 1, 3]);
    }
}

/// How one property came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PropertyStatus {
    /// It held on the whole history.
    Held,
    /// It was violated; see the violations.
    Violated,
    /// The history gives it nothing to judge (no alias switch, say).
    NotApplicable,
    /// It could not be judged (the run was too short, the history has a hole).
    Inconclusive,
}

/// One write (or event) quoted as evidence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    /// Its role in the violation (`newer write`, `stale write`, ...).
    pub label: String,
    /// Store arrival sequence, for audit records.
    pub seq: Option<u64>,
    /// Node id.
    pub node: String,
    /// Owner token.
    pub token: String,
    /// Fence.
    pub fence: u64,
    /// Operation or event type.
    pub what: String,
    /// CLOCK_MONOTONIC, ns.
    pub at_ns: u64,
}

/// One violation of one property, with its proof.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    /// One sentence.
    pub summary: String,
    /// The records that prove it.
    pub evidence: Vec<Evidence>,
    /// The faults in effect at that moment (`id kind target`).
    pub faults_active: Vec<String>,
    /// When, on the shared monotonic clock, ns.
    pub at_ns: u64,
}

/// One named property's outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PropertyResult {
    /// `no_stale_write`, `fence_anomaly`, `sticky_loss`, `single_writer`, `cleanup`, `liveness`.
    pub name: String,
    /// Outcome.
    pub status: PropertyStatus,
    /// One sentence for the report.
    pub sentence: String,
    /// The first violations (at most [`MAX_VIOLATIONS_KEPT`]).
    pub violations: Vec<Violation>,
    /// How many violations there were in all.
    pub violation_count: u64,
}

/// How many violations a property keeps for the report; the rest are counted.
pub const MAX_VIOLATIONS_KEPT: usize = 20;

/// What one node spent after it had truly lost ownership, and how its rounds ended.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeMetrics {
    /// Model calls made after the loss.
    pub wasted_model_calls: u64,
    /// Store calls sent after the loss.
    pub wasted_store_calls: u64,
    /// Time from each loss to that acquisition's last action, summed, ms.
    pub wasted_ms: u64,
    /// The longest time from a loss to the acquisition's last action, ms.
    pub loss_to_last_action_ms_max: u64,
    /// Rounds cancelled by ownership loss.
    pub lost_rounds: u64,
    /// Rounds ended by any other failure.
    pub other_aborts: u64,
    /// Syncs finished.
    pub syncs: u64,
}

/// What was measured, not judged.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Metrics {
    /// Per node.
    pub nodes: std::collections::BTreeMap<String, NodeMetrics>,
    /// Writes the store rejected by fencing.
    pub fenced_rejections: u64,
    /// Accepted writes that landed while the observer saw another owner (or none) on the primary.
    pub landed_while_another_owned: u64,
    /// Per fault: id, kind and target, and ms from request to verified effect.
    pub fault_effect_ms: Vec<(u64, String, u64)>,
}

/// What happened to a declared expected failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Expectation {
    /// The expected violation was seen: the known hazard is real (the suite passes).
    ExpectedFailureObserved,
    /// It was not seen (the suite fails: the scenario no longer shows its hazard).
    ExpectedFailureMissing,
}

/// The checker's whole answer for one history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckResult {
    /// The verdict, expected failures taken into account.
    pub verdict: Verdict,
    /// Set when the scenario declared an expected failure.
    pub expectation: Option<Expectation>,
    /// Per property.
    pub properties: Vec<PropertyResult>,
    /// Why the run is inconclusive, if it is (holes, unverified faults, garbage, damage).
    pub inconclusive: Vec<String>,
    /// What could not be judged or verified without making the run inconclusive (an older
    /// history version's unverifiable integrity).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Measurements.
    pub metrics: Metrics,
}
