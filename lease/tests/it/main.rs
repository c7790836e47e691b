//! Integration tests of the lease protocol against a real `redis-server` (no mocks).
//!
//! `redis_server` starts Debian's `redis-server` on a free loopback port per test.
//! `protocol` checks each rule of the protocol; `interleavings` is the proptest over random
//! interleavings; `flaws` (built only with `--features flaws`) shows each flaw's deviation, paired
//! with the same scenario on the correct build in `flaw_controls`.

mod flaw_controls;
mod flaw_scenarios;
#[cfg(feature = "flaws")]
mod flaws;
mod interleavings;
mod protocol;
mod redis_server;
