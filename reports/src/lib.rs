//! leasequake's result model: what a run concluded, in types every renderer and the CLI share.
//!
//! ```text
//! history  the run's vocabulary: node protocol commands and events, store audit records
//! model    Verdict, exit codes, and the checker's result (properties, violations, metrics)
//! ```
//!
//! No tokio, no I/O beyond what a renderer writes; renderers arrive with the report issue.

pub mod history;
mod model;

pub use model::{
    CheckResult, Evidence, Expectation, Metrics, NodeMetrics, PropertyResult, PropertyStatus, Verdict, Violation,
    MAX_VIOLATIONS_KEPT,
};
