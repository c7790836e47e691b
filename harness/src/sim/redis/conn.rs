//! An instance behind redis-rs's async `ConnectionLike`: the lease's real calls (`Script::
//! invoke_async`, `query_async`) run on the model unchanged, and read its replies through
//! redis-rs's own parser.

use std::sync::{Arc, Mutex, PoisonError};

use redis::aio::ConnectionLike;
use redis::{Cmd, Pipeline, RedisFuture, Value};

use super::Instance;

/// The instance's wall clock, ms (the simulation's virtual time plus the instance's offset).
pub type InstanceClock = Arc<dyn Fn() -> u64 + Send + Sync>;

/// A client connection to one model instance.
#[derive(Clone)]
pub struct ModelConnection {
    instance: Arc<Mutex<Instance>>,
    clock: InstanceClock,
}

impl ModelConnection {
    /// A connection to `instance`, whose clock is `clock`.
    #[must_use]
    pub fn new(instance: Arc<Mutex<Instance>>, clock: InstanceClock) -> Self {
        Self { instance, clock }
    }

    /// Runs `cmd` on the instance now, on its clock.
    pub fn exec(&self, cmd: &Cmd) -> Value {
        let args = args(cmd);
        let now = (self.clock)();
        self.instance.lock().unwrap_or_else(PoisonError::into_inner).exec(&args, now).to_value()
    }
}

impl ConnectionLike for ModelConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        let reply = self.exec(cmd);
        Box::pin(async move { Ok(reply) })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        let replies: Vec<Value> = pipeline.cmd_iter().map(|c| self.exec(c)).skip(offset).take(count).collect();
        Box::pin(async move { Ok(replies) })
    }

    fn get_db(&self) -> i64 {
        0
    }
}

/// A command's arguments, its name first.
#[must_use]
pub fn args(cmd: &Cmd) -> Vec<Vec<u8>> {
    cmd.args_iter()
        .map(|a| match a {
            redis::Arg::Simple(b) => b.to_vec(),
            // A cursor argument (SCAN's): the model has no cursors, it starts from the top.
            _ => b"0".to_vec(),
        })
        .collect()
}
