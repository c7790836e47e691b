//! The simulation's own draw of a seed's faults, when the scenario has no `[random]` section:
//! every kind the world can apply, each with fields in the ranges the scenario files allow. Faults
//! that would mask each other are kept apart (the container lane's rule): two store-wide faults,
//! two process faults, two faults on Redis itself. Every fault heals a liveness bound before the
//! end, so that liveness can be judged.

use leasequake_reports::history::FaultKind;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::scenario::{Direction, Fault, Link, Mode, Scenario};

/// The kinds the world applies (docs/sim.md).
pub const KINDS: [FaultKind; 14] = [
    FaultKind::Failover,
    FaultKind::Partition,
    FaultKind::Pause,
    FaultKind::StallRenewal,
    FaultKind::Crash,
    FaultKind::SlowStore,
    FaultKind::FailingStore,
    FaultKind::SlowModel,
    FaultKind::SlowRedis,
    FaultKind::LoseReplies,
    FaultKind::KeyLoss,
    FaultKind::RedisRestart,
    FaultKind::PauseWrites,
    FaultKind::ClockJump,
];

/// Faults drawn per seed.
pub(super) const FAULTS: u32 = 3;
/// The longest fault, ms.
pub(super) const LONGEST_MS: u64 = 4_000;
/// No fault before this, ms.
pub(super) const FROM_MS: u64 = 2_000;

/// Which faults must not overlap another of their group.
pub(super) fn group(k: FaultKind) -> Option<usize> {
    if k.store_wide() {
        Some(0)
    } else if k.stops_a_process() {
        Some(1)
    } else if k.acts_on_redis() {
        Some(2)
    } else {
        None
    }
}

/// Up to [`FAULTS`] faults for `seed` within `virtual_s` (fewer when one cannot be kept apart),
/// each one a scenario file may hold for this configuration (`scenario::fault_fits`), so that
/// every finding can be exported to containers.
#[must_use]
pub fn draw(s: &Scenario, seed: u64, virtual_s: u64) -> Vec<Fault> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xfa17_5eed);
    // The subset and the triggers have streams of their own: a plain draw is the same with or
    // without them.
    let draw = s.sim.unwrap_or_default();
    let kinds = enabled(draw.swarm, seed);
    let mut extra = ChaCha8Rng::seed_from_u64(seed ^ 0x7219_9e25);
    let until_ms = virtual_s.saturating_mul(1000).saturating_sub(s.liveness_bound_ms() + 2_000);
    if until_ms < FROM_MS + LONGEST_MS {
        return Vec::new();
    }
    // The file the draw's faults must fit: this one with them in it (and so without `[sim]`).
    let mut file = s.clone();
    file.duration_s = virtual_s;
    file.sim = None;
    let mut windows: [Vec<(u64, u64)>; 3] = Default::default();
    let mut faults = Vec::new();
    for _ in 0..FAULTS {
        // Bounded: a draw that overlaps another of its group, or that a scenario file could not
        // hold, is drawn again at most 20 times.
        let kept = (0..20).find_map(|_| {
            let (kind, at_ms, duration_ms) = when(&mut rng, &kinds, s, until_ms)?;
            let apart =
                group(kind).is_none_or(|g| windows[g].iter().all(|(a, b)| at_ms + duration_ms <= *a || *b <= at_ms));
            let mut f = fault(&mut rng, s, kind, (at_ms, duration_ms));
            if draw.triggers {
                triggered(&mut extra, &mut f, s.liveness_bound_ms());
            }
            // A file must be able to hold it as it now is (triggered or not).
            (apart && crate::scenario::fault_fits(&file, &f).is_ok()).then_some(f)
        });
        let Some(f) = kept else { continue };
        if let Some(g) = group(f.kind) {
            windows[g].push((f.at_ms(), f.at_ms() + f.duration_ms()));
        }
        faults.push(f);
    }
    faults
}

/// The kinds a seed draws from: all of them, or (swarm) each with even odds, at least one.
pub(super) fn enabled(swarm: bool, seed: u64) -> Vec<FaultKind> {
    if !swarm {
        return KINDS.to_vec();
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5a4a_4a5a);
    let kinds: Vec<FaultKind> = KINDS.iter().copied().filter(|_| rng.random_bool(0.5)).collect();
    if kinds.is_empty() {
        vec![KINDS[rng.random_range(0..KINDS.len())]]
    } else {
        kinds
    }
}

/// The node events a drawn fault may wait for: every checkpoint (so every phase of the round),
/// the acquire, and the writes that matter most; each happens in every round. (Not `renewed`:
/// a round of the recommended configuration is shorter than its renewal interval.)
pub(super) const TRIGGERS: [&str; 10] = [
    "checkpoint-1",
    "checkpoint-2",
    "checkpoint-3",
    "checkpoint-4",
    "checkpoint-5",
    "checkpoint-6",
    "checkpoint-7",
    "acquired",
    "store_call_sent:switch_alias",
    "store_call_sent:persist_record",
];

/// With even odds, a fault on a node waits for a node event instead of its time: armed at its
/// second, less a liveness bound's worth of seconds (so that it fires near where it was drawn),
/// aimed at whoever reports the event.
fn triggered(rng: &mut ChaCha8Rng, f: &mut Fault, bound_ms: u64) {
    if !f.kind.needs_a_node() || !rng.random_bool(0.5) {
        return;
    }
    let on = TRIGGERS[rng.random_range(0..TRIGGERS.len())];
    trigger(f, on, bound_ms);
}

/// Makes `f` wait for node event `on` (one of [`TRIGGERS`]) instead of its time.
pub(super) fn trigger(f: &mut Fault, on: &str, bound_ms: u64) {
    let armed_ms = (f.at_ms().saturating_sub(bound_ms / 2) / 1000 * 1000).max(FROM_MS);
    f.on = Some(on.to_owned());
    f.target = Some("owner".into());
    f.exact_ms = Some((armed_ms, f.duration_ms()));
    f.at_s = armed_ms / 1000;
}

/// A kind of `kinds` and its window: `None` when the window does not fit before `until_ms`.
fn when(rng: &mut ChaCha8Rng, kinds: &[FaultKind], s: &Scenario, until_ms: u64) -> Option<(FaultKind, u64, u64)> {
    let kind = kinds[rng.random_range(0..kinds.len())];
    let duration_ms = match kind {
        // A failover lasts past Sentinel's down-after and election, or it is only a blip.
        FaultKind::Failover => {
            let floor = s.sentinel.down_after_ms + 2_000;
            rng.random_range(floor..=floor + LONGEST_MS)
        }
        // Instantaneous on containers.
        FaultKind::KeyLoss => 0,
        // The container lane's probe waits 1 s for a write to block: at least 2 s.
        FaultKind::PauseWrites => rng.random_range(2_000..=LONGEST_MS),
        _ => rng.random_range(200..=LONGEST_MS),
    };
    if FROM_MS + duration_ms > until_ms {
        return None;
    }
    Some((kind, rng.random_range(FROM_MS..=until_ms - duration_ms), duration_ms))
}

/// One fault of `kind` with its fields drawn (in this order: the draw's stream is fixed).
fn fault(rng: &mut ChaCha8Rng, s: &Scenario, kind: FaultKind, window: (u64, u64)) -> Fault {
    let target = kind.needs_a_node().then(|| rng.random_range(0..=s.nodes.count + 1));
    let link = (kind == FaultKind::Partition).then(|| rng.random_range(0..3));
    let mode = match kind {
        FaultKind::Partition => Some(usize::from(!rng.random_bool(0.5))),
        FaultKind::Failover => Some(rng.random_range(0..3)),
        _ => None,
    };
    let latency_ms = match kind {
        FaultKind::SlowStore | FaultKind::SlowModel => Some(rng.random_range(100..=800)),
        FaultKind::SlowRedis => Some(rng.random_range(20..=400)),
        _ => None,
    };
    let jump_ms = (kind == FaultKind::ClockJump).then(|| {
        let ms = rng.random_range(500..=20_000i64);
        if rng.random_bool(0.5) {
            ms
        } else {
            -ms
        }
    });
    built(kind, window, Choices { target, link, mode, latency_ms, jump_ms })
}

/// A fault's choices beyond its kind and window, each an index or a value in the draw's ranges.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Choices {
    /// 0 or 1: the owner; k >= 2: node n(k-1).
    pub target: Option<u32>,
    /// Redis, the store, both.
    pub link: Option<usize>,
    /// Partition: blackhole, reset; failover: pause, isolate, manual.
    pub mode: Option<usize>,
    pub latency_ms: Option<u64>,
    pub jump_ms: Option<i64>,
}

/// The fault of `kind` in `window` with `choices` (the draw's and the strategies' one builder).
pub(super) fn built(kind: FaultKind, (at_ms, duration_ms): (u64, u64), c: Choices) -> Fault {
    let target = kind.needs_a_node().then(|| match c.target.unwrap_or(0) {
        0 | 1 => "owner".to_owned(),
        n => format!("n{}", n - 1),
    });
    Fault {
        kind,
        target,
        at_s: at_ms / 1000,
        duration_s: duration_ms.div_ceil(1000),
        link: c.link.filter(|_| kind == FaultKind::Partition).map(|i| [Link::Redis, Link::Store, Link::Both][i % 3]),
        mode: match (kind, c.mode) {
            (FaultKind::Partition, m) => Some([Mode::Blackhole, Mode::Reset][m.unwrap_or(0) % 2]),
            (FaultKind::Failover, m) => Some([Mode::Pause, Mode::Isolate, Mode::Manual][m.unwrap_or(0) % 3]),
            _ => None,
        },
        latency_ms: match kind {
            FaultKind::SlowStore | FaultKind::SlowModel | FaultKind::SlowRedis => c.latency_ms,
            _ => None,
        },
        jitter_ms: None,
        direction: (kind == FaultKind::SlowRedis).then_some(Direction::Both),
        follow_ms: None,
        never_follow: None,
        follow_ms_by_node: None,
        jump_ms: c.jump_ms.filter(|_| kind == FaultKind::ClockJump),
        unreplicated_acquire: None,
        command: None,
        at_ms: None,
        duration_ms: None,
        exact_ms: Some((at_ms, duration_ms)),
        number: None,
        on: None,
    }
}
