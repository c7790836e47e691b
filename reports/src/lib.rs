//! leasequake's result model: what a run concluded, in types every renderer and the CLI share.
//!
//! ```text
//! history   the run's vocabulary: node protocol commands and events, store audit records
//! model     Verdict, exit codes, and the checker's result (properties, violations, metrics)
//! suite     a suite run: summary.json's versioned schema, what every renderer reads
//! junit     junit.xml (one test case per scenario and property)
//! markdown  summary.md (CI job summaries)
//! html      report.html (index and per-scenario timelines; no script, no network)
//! ```
//!
//! No tokio and no I/O: renderers return strings; the harness writes them.

pub mod coverage;
pub mod history;
pub mod html;
pub mod junit;
pub mod markdown;
mod model;
pub mod suite;
pub mod wire;

#[cfg(test)]
mod render_tests;

mod text;

pub use text::{bounded, escaped, markdown, printable, QUOTE_MAX, REASONS_MAX};

pub use model::{
    CheckResult, Evidence, Expectation, Metrics, NodeMetrics, PropertyResult, PropertyStatus, Verdict, Violation,
    MAX_VIOLATIONS_KEPT,
};
