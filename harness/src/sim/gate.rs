//! A gate holds tasks still in virtual time, as SIGSTOP holds a process: while it is shut, every
//! task behind it is pending (timers keep running and fire on reopening, as after SIGCONT). The
//! simulation puts each node's tasks behind the node's gate (`pause`), and its renewal task behind
//! a second one (`stall_renewal`).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use tokio::time::{Instant, Sleep};

/// Polls of one task at one virtual instant beyond which it is taken to spin: a busy loop that
/// never waits on a timer keeps the runtime from ever being idle, so virtual time would never move
/// again. The task is then held for good, and the gate remembers when (the world reports it).
const SPIN_POLLS: u32 = 100_000;

/// Shut until an instant, or open.
#[derive(Debug, Default)]
pub struct Gate {
    until: Mutex<Option<Instant>>,
    spun: Mutex<Option<Instant>>,
}

impl Gate {
    /// Shuts the gate until `until` (a later `shut` extends it, an earlier one does not shorten it).
    pub fn shut_until(&self, until: Instant) {
        let mut u = self.until.lock().unwrap_or_else(PoisonError::into_inner);
        *u = Some(u.map_or(until, |old| old.max(until)));
    }

    /// When a task behind the gate was first held for spinning.
    pub fn spun(&self) -> Option<Instant> {
        *self.spun.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn mark_spun(&self, at: Instant) {
        self.spun.lock().unwrap_or_else(PoisonError::into_inner).get_or_insert(at);
    }

    /// When the gate opens, if it is shut now.
    fn shut(&self) -> Option<Instant> {
        let u = *self.until.lock().unwrap_or_else(PoisonError::into_inner);
        u.filter(|u| Instant::now() < *u)
    }
}

/// A future behind gates: polled only while every gate is open; held for good if it spins (see
/// [`SPIN_POLLS`]; the first gate records it).
pub struct Gated<F> {
    gates: Vec<Arc<Gate>>,
    inner: Pin<Box<F>>,
    wait: Option<Pin<Box<Sleep>>>,
    /// The instant of the last poll, and how many polls it has had.
    polls: (Option<Instant>, u32),
}

impl<F: Future> Gated<F> {
    /// `inner`, behind `gates`.
    pub fn new(gates: Vec<Arc<Gate>>, inner: F) -> Self {
        Self { gates, inner: Box::pin(inner), wait: None, polls: (None, 0) }
    }

    /// Counts a poll at `now`; true once the task has spun.
    fn spinning(&mut self, now: Instant) -> bool {
        if self.polls.0 == Some(now) {
            self.polls.1 = self.polls.1.saturating_add(1);
        } else {
            self.polls = (Some(now), 0);
        }
        if self.polls.1 < SPIN_POLLS {
            return false;
        }
        if let Some(g) = self.gates.first() {
            g.mark_spun(now);
        }
        true
    }
}

impl<F: Future> Future for Gated<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // Bounded: each turn either polls the inner future or waits for a gate to open.
        loop {
            let opens = self.gates.iter().filter_map(|g| g.shut()).max();
            let Some(opens) = opens else {
                self.wait = None;
                if self.spinning(Instant::now()) {
                    // Held without a waker: the runtime goes idle and time moves on.
                    return Poll::Pending;
                }
                return self.inner.as_mut().poll(cx);
            };
            let wait = self.wait.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(opens)));
            if wait.deadline() != opens {
                wait.as_mut().reset(opens);
            }
            match wait.as_mut().poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(()) => self.wait = None,
            }
        }
    }
}

/// The tasks of one node incarnation, so that a crash ends them all at once (as SIGKILL does).
#[derive(Debug, Default)]
pub struct Tasks(Mutex<Vec<tokio::task::AbortHandle>>);

impl Tasks {
    /// Tracks a task.
    pub fn track(&self, h: tokio::task::AbortHandle) {
        let mut v = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        v.retain(|t| !t.is_finished());
        v.push(h);
    }

    /// Ends every tracked task.
    pub fn abort_all(&self) {
        for t in self.0.lock().unwrap_or_else(PoisonError::into_inner).drain(..) {
            t.abort();
        }
    }
}

/// Spawns every task behind `gates` on the current runtime (a lease's renewal), tracked in `tasks`.
#[derive(Clone)]
pub struct GatedSpawner {
    /// The gates.
    pub gates: Vec<Arc<Gate>>,
    /// The incarnation's tasks.
    pub tasks: Arc<Tasks>,
}

impl redis_lease::Spawn for GatedSpawner {
    fn spawn(&self, task: redis_lease::BoxFuture) {
        self.tasks.track(tokio::spawn(Gated::new(self.gates.clone(), task)).abort_handle());
    }
}
