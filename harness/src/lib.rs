//! leasequake: a fault-injection harness that proves, on real infrastructure, that a Redis-leased
//! job never lets a stale node write after a newer owner.
//!
//! ```text
//! check        the checker: history in, verdicts and metrics out (pure)
//! clock        CLOCK_MONOTONIC ns, the one time base
//! env          the per-run environment: networks, Redis, Sentinels, proxy, store; cleanup
//! error        HarnessError: every failure names its cause and fix
//! doctor       `leasequake doctor`: what a run needs, and what to fix
//! docker       the Docker API connection (version negotiated), labels
//! history      history.jsonl in and out; verdicts.json written atomically
//! image        images built locally from files (no registry), tagged by content
//! node         the reference node: the tenant sync job behind the node protocol
//! supervisor   node processes: process groups, protocol lines, receipt stamps, signals
//! progress     what a person sees while a scenario runs (live line, or plain lines)
//! report       the suite's report directory: summary.json, junit.xml, summary.md, report.html
//! run          the runner: one scenario in a fresh environment, to a history and a verdict
//! runlog       the run directory's harness.log (tracing, per run)
//! scenario     scenario files: parsed, validated, errors with file, line and field
//! store        the vector store: collections, alias, audit log (ground truth), fencing
//! local_redis  a real redis-server process on a free loopback port (for the demo)
//! demo         workers contending for one tenant's lease against a local Redis
//! ```
//!
//! The environment (containers), nodes, faults, history, checker and runner arrive with their
//! issues; see ARCHITECTURE.md for the map.

pub mod bench;
pub mod check;
pub mod clock;
pub mod demo;
pub mod docker;
pub mod doctor;
pub mod env;
pub mod error;
pub(crate) mod fault;
pub mod history;
pub mod image;
pub mod local_redis;
pub mod node;
pub mod observer;
pub mod procfs;
pub mod progress;
pub mod report;
pub mod run;
pub mod runlog;
pub mod scenario;
pub mod selftest;
pub mod store;
pub mod supervisor;
pub mod trigger;
pub mod watch;

// The harness is the production build of the node: it must never link a flawed lease. Cargo
// unifies features across a build, so one `redis-lease/flaws` on any dependency line would leak
// the flaws in here; this stops such a build. Only this package's own `flaws` feature (the
// self-test node, built into target/flawed) may link them, and that binary runs nothing but nodes.
const _: () = assert!(
    !redis_lease::FLAWS_COMPILED || cfg!(feature = "flaws"),
    "redis-lease was compiled with `flaws`: only the self-test binary (`--features flaws`) may enable that feature"
);
