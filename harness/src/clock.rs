//! The one time base: CLOCK_MONOTONIC in ns, shared by every process on the machine (containers
//! included), so harness, node and store stamps can be placed on one axis. Ordering claims never
//! rest on it; the store's arrival sequence decides those.

/// CLOCK_MONOTONIC now, in ns.
#[must_use]
pub fn mono_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    (t.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(t.tv_nsec as u64)
}
