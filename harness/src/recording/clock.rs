//! The one time base: CLOCK_MONOTONIC in ns, shared by every process on the machine (containers
//! included), so harness, node and store stamps can be placed on one axis. Ordering claims never
//! rest on it; the store's arrival sequence decides those.

/// CLOCK_MONOTONIC now, in ns.
#[must_use]
pub fn mono_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    (t.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(t.tv_nsec as u64)
}

/// A past (or present) `tokio::time::Instant` on the same axis as [`mono_ns`]: std's `Instant` is
/// CLOCK_MONOTONIC on Linux but opaque, so the distance to now is taken off a reading of now. Both
/// readings are a few hundred ns apart, far less than any margin a decision is judged against.
#[must_use]
pub fn instant_ns(at: tokio::time::Instant) -> u64 {
    let now = tokio::time::Instant::now();
    let ns = mono_ns();
    let back = u64::try_from(now.saturating_duration_since(at).as_nanos()).unwrap_or(u64::MAX);
    let ahead = u64::try_from(at.saturating_duration_since(now).as_nanos()).unwrap_or(u64::MAX);
    ns.saturating_sub(back).saturating_add(ahead)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{instant_ns, mono_ns};

    #[test]
    fn an_instant_lands_on_the_monotonic_axis() {
        let before = mono_ns();
        let at = tokio::time::Instant::now();
        let after = mono_ns();
        let ns = instant_ns(at);
        assert!(before <= ns && ns <= after + 1_000_000, "{before} <= {ns} <= {after}");
        let earlier = instant_ns(at - Duration::from_millis(50));
        assert!(ns - earlier >= 49_000_000 && ns - earlier <= 51_000_000, "{}", ns - earlier);
    }
}
