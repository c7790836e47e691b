//! leasequake: a fault-injection harness that proves, on real infrastructure, that a Redis-leased
//! job never lets a stale node write after a newer owner.
//!
//! The folders follow a run's flow (ARCHITECTURE.md has the map):
//!
//! ```text
//! runner/       scenario files; the runner and its timeline; faults (one module per family),
//!               triggers, the observer, the drift watch, progress
//! environment/  Docker, images built from files, the per-run containers; a local redis-server
//! nodes/        node processes and the node protocol, the reference node, the vector store
//! recording/    the one time base, history.jsonl and verdicts.json, harness.log
//! judging/      the checker: history in, verdicts and metrics out (pure)
//! reporting/    the suite's report directory: summary.json, junit.xml, summary.md, report.html
//! tools/        the self-test, benchmarks, doctor, the demo
//! sim/          the deterministic simulation: a Redis model the lease's real calls run on
//! error.rs      HarnessError: every failure names its cause and fix
//! exit.rs       how every command ends: one mapping to the exit codes
//! ```

pub mod command_line;
mod environment;
pub mod error;
pub mod exit;
pub mod json_output;
mod judging;
mod nodes;
mod recording;
mod reporting;
mod runner;
pub mod sim;
mod tools;

// Each module keeps its path at the crate root (`leasequake::run`, `crate::env`); the folders
// above group them by stage.
pub use environment::{docker, env, image, local_redis};
pub use judging::check;
pub use nodes::{job, model, node, procfs, store, supervisor};
pub(crate) use recording::recorder;
pub use recording::{clock, history, runlog};
pub use reporting::report;
pub(crate) use runner::fault;
pub use runner::{holders, observer, progress, run, scenario, suite, trigger, watch};
pub use tools::{bench, demo, doctor, selftest};

// The harness is the production build of the node: it must never link a flawed lease. Cargo
// unifies features across a build, so one `redis-lease/flaws` on any dependency line would leak
// the flaws in here; this stops such a build. Only this package's own `flaws` feature (the
// self-test node, built into target/flawed) may link them, and that binary runs nothing but nodes.
const _: () = assert!(
    !redis_lease::FLAWS_COMPILED || cfg!(feature = "flaws"),
    "redis-lease was compiled with `flaws`: only the self-test binary (`--features flaws`) may enable that feature"
);
