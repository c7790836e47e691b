//! The server's descriptor budget: every proxy's listener takes one place and every link two
//! (client and upstream), from one pool sized below the process's open-file limit, so that
//! whatever the proxies are asked to carry the API keeps its own reserve and answers.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Descriptors kept out of the pool: the API's connections, its listener, the runtime's own
/// (epoll, event and timer descriptors), standard streams and the `-config` file.
pub const RESERVE: u64 = crate::api::MAX_API_CONNECTIONS as u64 + 64;

/// What one link takes: its client's socket and its upstream's.
const PER_LINK: u32 = 2;

/// The pool proxies draw their descriptors from.
#[derive(Clone, Debug)]
pub struct Descriptors {
    pool: Arc<Semaphore>,
    size: usize,
}

impl Descriptors {
    /// A pool of `size` places.
    #[must_use]
    pub fn new(size: usize) -> Self {
        let size = size.min(Semaphore::MAX_PERMITS);
        Self { pool: Arc::new(Semaphore::new(size)), size }
    }

    /// A pool sized from this process's open-file limit, less [`RESERVE`].
    #[must_use]
    pub fn from_limit() -> Self {
        Self::new(pool_size(open_file_limit()))
    }

    /// The pool's size.
    #[must_use]
    pub fn size(&self) -> usize {
        self.size
    }

    /// Places in use.
    #[must_use]
    pub fn in_use(&self) -> usize {
        self.size.saturating_sub(self.pool.available_permits())
    }

    /// A place for a listener, or `None` when the pool is spent.
    #[must_use]
    pub fn listener(&self) -> Option<OwnedSemaphorePermit> {
        self.pool.clone().try_acquire_owned().ok()
    }

    /// Places for one link, or `None` when the pool is spent.
    #[must_use]
    pub fn link(&self) -> Option<OwnedSemaphorePermit> {
        self.pool.clone().try_acquire_many_owned(PER_LINK).ok()
    }
}

/// The pool's size under an open-file limit of `limit` (`None`: unlimited).
#[must_use]
pub fn pool_size(limit: Option<u64>) -> usize {
    let size = limit.map_or(u64::MAX, |l| l.saturating_sub(RESERVE));
    usize::try_from(size).unwrap_or(usize::MAX)
}

/// This process's soft open-file limit (`None`: unlimited).
#[must_use]
pub fn open_file_limit() -> Option<u64> {
    rustix::process::getrlimit(rustix::process::Resource::Nofile).current
}

/// Raises the soft open-file limit to the hard one, as Go's runtime does for Toxiproxy; returns
/// the limit in force afterwards.
pub fn raise_open_file_limit() -> Option<u64> {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let now = getrlimit(Resource::Nofile);
    if now.current != now.maximum {
        let _ = setrlimit(Resource::Nofile, Rlimit { current: now.maximum, maximum: now.maximum });
    }
    open_file_limit()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_keeps_the_reserve_out_and_never_wraps() {
        assert_eq!(pool_size(Some(1024)), 1024 - 320);
        assert_eq!(pool_size(Some(100)), 0, "a limit below the reserve leaves no place, not a wrapped count");
        assert_eq!(pool_size(None), usize::MAX);
    }

    #[test]
    fn a_link_takes_two_places_a_listener_one_and_both_give_them_back() {
        let d = Descriptors::new(5);
        let l = d.listener().unwrap();
        let a = d.link().unwrap();
        let b = d.link().unwrap();
        assert_eq!(d.in_use(), 5);
        assert!(d.link().is_none() && d.listener().is_none(), "the pool is spent");
        drop(a);
        assert!(d.link().is_some(), "a closed link's places are free again");
        drop((l, b));
        assert_eq!(d.in_use(), 0);
    }
}
