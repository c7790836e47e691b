//! The deterministic simulation (`leasequake sim`, docs/sim.md): the lease's and the node's real
//! code in a world of virtual time, model Redis instances and a model store, under fault
//! schedules drawn from one seed. So far: the Redis model (`redis`).

pub mod redis;
