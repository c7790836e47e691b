//! The one time base: CLOCK_MONOTONIC in ns, shared by every process on the machine (containers
//! included), so harness, node and store stamps can be placed on one axis. Ordering claims never
//! rest on it; the store's arrival sequence decides those.

/// CLOCK_MONOTONIC now, in ns.
#[must_use]
pub fn mono_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    (t.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(t.tv_nsec as u64)
}

/// A reading of `now` is bracketed by two of [`mono_ns`]; a bracket narrower than this is taken.
const BRACKET_NS: u64 = 20_000;

/// A past (or present) `tokio::time::Instant` on the same axis as [`mono_ns`]: std's `Instant` is
/// CLOCK_MONOTONIC on Linux but opaque, so the distance to now is taken off a reading of now,
/// bracketed by two monotonic readings (the middle is taken: the error is at most half the
/// bracket). A thread preempted between two readings widens the bracket, so the narrowest of a few
/// tries is kept: one plain pair of readings was seen 52 ms apart on a loaded machine, and the
/// reference node then stamped a renewal's send 52 ms after the proxy had read it (`testimony`).
#[must_use]
pub fn instant_ns(at: tokio::time::Instant) -> u64 {
    let mut best: Option<(u64, u64, tokio::time::Instant)> = None;
    // Bounded: a few tries, the narrowest kept.
    for _ in 0..8 {
        let before = mono_ns();
        let now = tokio::time::Instant::now();
        let after = mono_ns();
        let width = after.saturating_sub(before);
        if best.is_none_or(|(w, _, _)| width < w) {
            best = Some((width, before.saturating_add(width / 2), now));
        }
        if width <= BRACKET_NS {
            break;
        }
    }
    let Some((_, ns, now)) = best else { return mono_ns() };
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
