//! Conformance of the fault proxy with Toxiproxy 2.12: the API through the ecosystem's Rust client
//! (`toxiproxy_rust`, blocking, so from `spawn_blocking`) and through raw HTTP, and every toxic's
//! effect on real TCP traffic. Timing assertions are lower bounds and gross upper bounds only.

mod api;
mod client;
mod descriptors;
mod ecosystem_client;
mod support;
mod toxics;
mod witness;
