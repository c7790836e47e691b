//! leasequake's result model: what a run concluded, in types every renderer and the CLI share.
//!
//! ```text
//! model  Verdict and its exit code
//! ```
//!
//! No tokio, no I/O beyond what a renderer writes; renderers arrive with the report issue.

mod model;

pub use model::Verdict;
