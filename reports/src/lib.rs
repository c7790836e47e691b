//! leasequake's result model: what a run concluded, in types every renderer and the CLI share.
//!
//! ```text
//! history  the run's vocabulary: node protocol commands and events, store audit records
//! model    Verdict and its exit code
//! ```
//!
//! No tokio, no I/O beyond what a renderer writes; renderers arrive with the report issue.

pub mod history;
mod model;

pub use model::Verdict;
