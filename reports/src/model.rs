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
