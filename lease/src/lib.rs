//! A Redis lease for one job per tenant: acquire with `SET NX PX`, renew with an owner-compared
//! `PEXPIRE`, release with an owner-compared `DEL`, sticky loss, and a fence per acquisition.
//!
//! ```text
//! config     LeaseConfig: every duration, production defaults, validate()
//! token      OwnerToken and TokenSource: one unique identity per acquisition
//! clock      Clock and Spawn: time and tasks, handed in (a simulation can hand in its own)
//! ownership  the decisions, no I/O: validity, renewal timing, sticky loss
//! script     the Redis I/O: the Lua scripts, generic over redis-rs's async ConnectionLike
//! client     LeaseClient::acquire
//! guard      LeaseGuard: renewal task, ensure_owned checkpoints, lost(), release
//! flaw       known-bad variants, selectable only with the `flaws` feature
//! error      LeaseError
//! ```
//!
//! The protocol rules, each in one place:
//! - acquire and fence issue: `lua/acquire.lua`, retried in `client`;
//! - renew every interval, compare then `PEXPIRE`: `lua/renew.lua`, `guard::renewal`;
//! - what counts as loss, and that the first loss is final: `ownership`;
//! - the checkpoint's first line (the sticky token): `LeaseGuard::ensure_owned`;
//! - release, compare then `DEL`: `lua/release.lua`, `LeaseGuard::release`.
//!
//! This crate knows nothing of faults, containers, scenarios or reports. A fence is only as good
//! as Redis's memory of its counter: a failover that loses the counter, or a restart without
//! persistence, can issue a fence twice. A store that enforces fences should issue its own.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod client;
mod clock;
mod config;
mod error;
mod flaw;
mod guard;
mod ownership;
mod script;
mod token;

pub use client::LeaseClient;
pub use clock::{BoxFuture, Clock, Spawn, TokioClock};
pub use config::{LeaseConfig, ReplicationGuard, DEFAULT_ACQUIRE_WAIT, DEFAULT_TTL};
pub use error::LeaseError;
#[cfg(feature = "flaws")]
pub use flaw::Flaw;
pub use guard::{GuardCounters, LeaseEvent, LeaseGuard, Observer, Released};
pub use ownership::{Loss, LossReason};
pub use script::LeaseKeys;
pub use token::{OwnerToken, TokenSource, UniqueTokens};

/// Whether this build can select flaws (`--features flaws`). A production build answers `false`.
pub const FLAWS_COMPILED: bool = cfg!(feature = "flaws");
