//! The clock and the spawner the protocol runs on, handed in rather than reached for globally.
//!
//! Production uses tokio's clock and a tokio runtime handle (possibly a dedicated renewal runtime
//! on its own thread, so a node can stall renewal alone). A deterministic simulation can hand in
//! a virtual clock and its own executor without touching the protocol's decisions.

use std::future::Future;
use std::pin::Pin;

use tokio::time::Instant;

/// A boxed, sendable future: what clocks and spawners trade in.
pub type BoxFuture = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// Monotonic time for lease arithmetic. Never wall-clock time.
pub trait Clock: Send + Sync + 'static {
    /// Now, on the monotonic clock.
    fn now(&self) -> Instant;
    /// Completes at `deadline`.
    fn sleep_until(&self, deadline: Instant) -> BoxFuture;
}

/// tokio's clock (which tests of pure logic may pause and advance).
#[derive(Debug, Clone, Copy, Default)]
pub struct TokioClock;

impl Clock for TokioClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
    fn sleep_until(&self, deadline: Instant) -> BoxFuture {
        Box::pin(tokio::time::sleep_until(deadline))
    }
}

/// Runs the renewal task. The task watches its own stop token, so no join handle is needed.
pub trait Spawn: Send + Sync + 'static {
    /// Starts `task` in the background.
    fn spawn(&self, task: BoxFuture);
}

impl Spawn for tokio::runtime::Handle {
    fn spawn(&self, task: BoxFuture) {
        drop(tokio::runtime::Handle::spawn(self, task));
    }
}
