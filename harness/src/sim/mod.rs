//! The deterministic simulation (`leasequake sim`, docs/sim.md): the lease's and the reference
//! node's real code (`job`) in a world of virtual time, model Redis instances (`redis`) and the
//! real store's rules, one seed deciding everything. `world` runs one seed into a history the
//! checker judges, as it judges a container run's; `seeds` runs many; `shrink` makes a failing
//! seed's schedule smaller and `export` writes it as a scenario file for containers; `strategy`
//! (tests) draws schedules as proptest strategies, which proptest shrinks its own way.

mod cluster;
mod env;
pub mod export;
mod fault;
pub mod gate;
mod net;
pub mod redis;
mod schedule;
pub mod seeds;
pub mod shrink;
mod trigger;
mod witness;
mod world;

pub use world::{run_schedule, run_seed, schedule, SimRun};

#[cfg(test)]
mod strategy;
#[cfg(test)]
mod tests;
