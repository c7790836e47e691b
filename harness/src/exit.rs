//! How every command ends, in one mapping (README): 0 passed, 1 failed, 2 a usage error or an
//! input to fix, 3 inconclusive (neither a pass nor a failure was observed).

use leasequake_reports::Verdict;

use crate::error::HarnessError;

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Everything held (or, for a tool, it did its job).
    Passed,
    /// A check found a problem.
    Failed,
    /// A command line, a file or an environment the user can fix.
    Usage,
    /// Neither a pass nor a failure was observed.
    Inconclusive,
}

impl Exit {
    /// The process exit code.
    #[must_use]
    pub fn code(self) -> u8 {
        match self {
            Self::Passed => 0,
            Self::Failed => 1,
            Self::Usage => 2,
            Self::Inconclusive => 3,
        }
    }

    /// A code computed elsewhere (the self-test's table); anything unknown is inconclusive.
    #[must_use]
    pub fn from_code(code: u8) -> Self {
        match code {
            0 => Self::Passed,
            1 => Self::Failed,
            2 => Self::Usage,
            _ => Self::Inconclusive,
        }
    }

    /// An error's ending: the user's to fix, or nothing observed.
    #[must_use]
    pub fn of_error(e: &HarnessError) -> Self {
        match e {
            HarnessError::Usage { .. } => Self::Usage,
            _ => Self::Inconclusive,
        }
    }
}

impl From<Verdict> for Exit {
    fn from(v: Verdict) -> Self {
        match v {
            Verdict::Pass => Self::Passed,
            Verdict::Fail => Self::Failed,
            Verdict::Inconclusive => Self::Inconclusive,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Exit;
    use crate::error::HarnessError;
    use leasequake_reports::Verdict;

    #[test]
    fn verdicts_errors_and_codes_map_to_the_readme_s_exit_codes() {
        let verdicts = [Verdict::Pass, Verdict::Fail, Verdict::Inconclusive].map(|v| Exit::from(v).code());
        assert_eq!(verdicts, [0, 1, 3]);
        // The same codes as the verdicts' own.
        assert_eq!(
            verdicts.map(i32::from),
            [Verdict::Pass, Verdict::Fail, Verdict::Inconclusive].map(|v| v.exit_code())
        );
        assert_eq!(Exit::of_error(&HarnessError::usage("a typo")).code(), 2);
        assert_eq!(Exit::of_error(&HarnessError::Environment { detail: "gone".into() }).code(), 3);
        assert_eq!([0, 1, 2, 3, 7].map(|c| Exit::from_code(c).code()), [0, 1, 2, 3, 3]);
    }
}
