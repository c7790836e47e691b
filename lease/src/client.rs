//! `LeaseClient`: acquires a tenant's lease (`SET NX PX` + fence `INCR`, one script), retrying with
//! jitter until the acquire wait runs out, and hands back a running `LeaseGuard`.

use std::sync::{Arc, Mutex, PoisonError};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis::aio::ConnectionLike;
use tracing::{debug, warn};

use crate::clock::{Clock, Spawn, TokioClock};
use crate::config::{LeaseConfig, WAIT_SLACK};
use crate::error::LeaseError;
use crate::flaw::{self, Flaw};
use crate::guard::{timed, LeaseGuard, Observer, Shared};
use crate::ownership::{Ownership, Timing};
use crate::script::{AcquireReply, LeaseKeys, RedisOps};
use crate::token::{OwnerToken, TokenSource};

/// Acquires leases on one Redis connection handle.
pub struct LeaseClient<C> {
    ops: RedisOps<C>,
    config: LeaseConfig,
    tokens: Arc<dyn TokenSource>,
    clock: Arc<dyn Clock>,
    spawner: Option<Arc<dyn Spawn>>,
    rng: Mutex<StdRng>,
    observer: Option<Observer>,
}

impl<C: ConnectionLike + Clone + Send + Sync + 'static> LeaseClient<C> {
    /// A client on `conn` (a `MultiplexedConnection` or `ConnectionManager`), with `config`
    /// (validated here) and a source of unique owner tokens.
    ///
    /// # Errors
    /// [`LeaseError::InvalidConfig`] naming the offending field.
    pub fn new(conn: C, config: LeaseConfig, tokens: impl TokenSource) -> Result<Self, LeaseError> {
        config.validate()?;
        let seed = getrandom::u64().unwrap_or(0x5eed);
        Ok(Self {
            ops: RedisOps::new(conn, config.flaw),
            config,
            tokens: Arc::new(tokens),
            clock: Arc::new(TokioClock),
            spawner: None,
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
            observer: None,
        })
    }

    /// Run renewal tasks here (e.g. a dedicated renewal runtime's handle) instead of the runtime
    /// that calls `acquire`.
    #[must_use]
    pub fn with_spawner(mut self, spawner: impl Spawn) -> Self {
        self.spawner = Some(Arc::new(spawner));
        self
    }

    /// Use another clock (a simulation's).
    #[must_use]
    pub fn with_clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Tell `observer` of renewals and losses of every lease this client acquires.
    #[must_use]
    pub fn with_observer(mut self, observer: impl Fn(&crate::guard::LeaseEvent) + Send + Sync + 'static) -> Self {
        self.observer = Some(Arc::new(observer));
        self
    }

    /// Draw retry jitter from this seed (the harness passes one derived from the run's seed).
    #[must_use]
    pub fn with_jitter_seed(self, seed: u64) -> Self {
        *self.rng.lock().unwrap_or_else(PoisonError::into_inner) = StdRng::seed_from_u64(seed);
        self
    }

    /// The configuration in force.
    pub fn config(&self) -> &LeaseConfig {
        &self.config
    }

    /// Acquires `tenant`'s lease, retrying with jitter until the acquire wait runs out.
    ///
    /// # Errors
    /// [`LeaseError::AcquireTimeout`] naming the tenant and the holder's remaining ttl.
    pub async fn acquire(&self, tenant: &str) -> Result<LeaseGuard<C>, LeaseError> {
        let cfg = &self.config;
        let keys = LeaseKeys::new(&cfg.key_prefix, tenant);
        let ttl_ms = cfg.ttl.as_millis() as u64;
        let started = self.clock.now();
        let give_up = started + cfg.acquire_wait;
        let max_attempts =
            u32::try_from(cfg.acquire_wait.as_millis() / cfg.retry_min.as_millis().max(1) + 1).unwrap_or(u32::MAX);
        let mut holder_ttl_ms = None;
        let mut last_error;
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            let token = self.tokens.next_token();
            // Validity is counted from here, before the script is sent.
            let sent_at = self.clock.now();
            let reply = timed(self.clock.as_ref(), cfg.command_timeout, self.ops.acquire(&keys, &token, ttl_ms)).await;
            debug!(tenant, attempt = attempts, "acquire attempt");
            match reply {
                Some(Ok(AcquireReply::Acquired { fence })) => match self.replicated(&keys, &token).await {
                    Ok(()) => return Ok(self.start(tenant, keys, token, fence, sent_at)),
                    Err(why) => last_error = Some(why),
                },
                Some(Ok(AcquireReply::Held { pttl_ms })) => {
                    holder_ttl_ms = pttl_ms;
                    last_error = None;
                }
                Some(Err(e)) => {
                    let indeterminate = LeaseError::from_redis("acquire", self.clock.now() - sent_at, e);
                    if matches!(indeterminate, LeaseError::Indeterminate { .. }) {
                        self.abandon(&keys, &token).await;
                    }
                    last_error = Some(indeterminate.to_string());
                }
                None => {
                    self.abandon(&keys, &token).await;
                    last_error = Some(format!("acquire got no answer within {} ms", cfg.command_timeout.as_millis()));
                }
            }
            let now = self.clock.now();
            if now >= give_up || attempts >= max_attempts {
                return Err(LeaseError::AcquireTimeout {
                    tenant: tenant.to_owned(),
                    waited_ms: (now - started).as_millis() as u64,
                    attempts,
                    holder_ttl_ms,
                    last_error,
                });
            }
            let pause = {
                let mut rng = self.rng.lock().unwrap_or_else(PoisonError::into_inner);
                rng.random_range(cfg.retry_min..=cfg.retry_max)
            };
            self.clock.sleep_until(now + pause.min(give_up - now)).await;
        }
    }

    /// With the replication guard on, `WAIT`s for replicas after a won acquire; on a shortfall the
    /// key is given back and the attempt counts as lost.
    async fn replicated(&self, keys: &LeaseKeys, token: &OwnerToken) -> Result<(), String> {
        let Some(guard) = self.config.replication else { return Ok(()) };
        let budget = guard.timeout + WAIT_SLACK;
        let acked = timed(
            self.clock.as_ref(),
            budget,
            self.ops.wait_replicas(guard.replicas, guard.timeout.as_millis() as u64),
        )
        .await;
        let why = match acked {
            Some(Ok(n)) if n >= u64::from(guard.replicas) => return Ok(()),
            Some(Ok(n)) => format!("{n} of {} replicas acknowledged the acquire", guard.replicas),
            Some(Err(e)) => format!("WAIT failed: {e}"),
            None => "WAIT did not answer".to_owned(),
        };
        self.abandon(keys, token).await;
        Err(why)
    }

    /// Best effort: an acquire whose outcome is unknown (or unreplicated) may hold the key; delete
    /// it if, and only if, it holds this attempt's token. Otherwise it expires by its ttl.
    async fn abandon(&self, keys: &LeaseKeys, token: &OwnerToken) {
        let done = timed(self.clock.as_ref(), self.config.command_timeout, self.ops.release(keys, token)).await;
        if !matches!(done, Some(Ok(_))) {
            warn!(token = %token, "could not give back an uncertain acquire; it expires by its ttl");
        }
    }

    fn start(
        &self,
        tenant: &str,
        keys: LeaseKeys,
        token: OwnerToken,
        fence: u64,
        sent_at: tokio::time::Instant,
    ) -> LeaseGuard<C> {
        let cfg = &self.config;
        let timing = Timing {
            ttl: cfg.ttl,
            renew_interval: cfg.renew_interval(),
            drift: cfg.drift_margin(),
            no_deadline: flaw::is(cfg.flaw, Flaw::NoLocalDeadline),
        };
        let mut ownership = Ownership::acquired(timing, sent_at);
        if flaw::is(cfg.flaw, Flaw::ValidityFromReply) {
            ownership = ownership.counted_from(self.clock.now());
        }
        let shared = Shared::new(tenant.to_owned(), keys, token, fence, cfg.clone(), self.clock.clone(), ownership)
            .with_observer(self.observer.clone());
        let handle;
        let spawner: &dyn Spawn = match &self.spawner {
            Some(s) => s.as_ref(),
            None => {
                handle = tokio::runtime::Handle::current();
                &handle
            }
        };
        LeaseGuard::start(shared, self.ops.clone(), spawner)
    }
}
