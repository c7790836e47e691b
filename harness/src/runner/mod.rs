//! Stage 1: the scenario and its run. A scenario file is parsed and validated (`scenario`); the
//! runner (`run`) starts an environment and the nodes, drives the fault schedule on its timeline
//! (`fault` applies, probes and heals each kind; `trigger` fires faults on node and observer
//! events), samples the lease key (`observer`), watches the environment for drift (`watch`), and
//! shows a person what happens (`progress`). `suite` runs many scenarios into one suite directory,
//! in this process or in parallel child processes.

pub(crate) mod fault;
pub mod holders;
pub mod observer;
pub mod progress;
pub mod run;
pub mod scenario;
pub mod suite;
pub mod trigger;
pub mod watch;
