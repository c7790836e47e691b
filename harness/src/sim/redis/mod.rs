//! A Redis instance as a model: the keyspace and commands the lease, the node and the observer
//! use, with expiry on the instance's own clock, and `EVAL`/`EVALSHA`/`SCRIPT` running the real
//! Lua scripts in Lua 5.1 (as Redis does), atomically against the keyspace. A replica applies its
//! primary's effects and refuses writes; a restart without persistence forgets keys and scripts.
//! [`conn::ModelConnection`] puts an instance behind redis-rs's `ConnectionLike`, so the lease's
//! real calls run on it unchanged. docs/sim.md lists what the model does not capture.

pub mod conn;
pub mod keyspace;
mod lua;
pub mod reply;

use keyspace::spec;
pub use keyspace::Keyspace;
pub use keyspace::Role;
pub use reply::Reply;

/// One Redis instance.
pub struct Instance {
    data: Keyspace,
    scripts: lua::Scripts,
}

impl std::fmt::Debug for Instance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Instance").field("role", &self.data.role).finish_non_exhaustive()
    }
}

impl Instance {
    /// An empty instance in `role`.
    #[must_use]
    pub fn new(role: Role) -> Self {
        Self { data: Keyspace::new(role), scripts: lua::Scripts::new() }
    }

    /// Its role.
    #[must_use]
    pub fn role(&self) -> Role {
        self.data.role
    }

    /// Makes it a primary (a promotion: from now on it expires keys itself) or a replica.
    pub fn set_role(&mut self, role: Role) {
        self.data.role = role;
    }

    /// A restart without persistence: no keys, no scripts (a fresh Lua state).
    pub fn restart(&mut self) {
        self.data.clear();
        self.scripts = lua::Scripts::new();
    }

    /// The keyspace as a full resync sends it.
    #[must_use]
    pub fn snapshot(&self) -> keyspace::Keyspace {
        self.data.clone()
    }

    /// A full resync from a master: its data replaces this instance's, which becomes a replica.
    pub fn resync(&mut self, mut data: keyspace::Keyspace) {
        data.role = Role::Replica;
        data.effects.clear();
        self.data = data;
    }

    /// The effects written since the last call, for the replicas (oldest first).
    pub fn take_effects(&mut self) -> Vec<Vec<Vec<u8>>> {
        std::mem::take(&mut self.data.effects)
    }

    /// Applies one effect from the primary (on a replica).
    pub fn apply(&mut self, effect: &[Vec<u8>], now_ms: u64) {
        self.data.apply(effect, now_ms);
    }

    /// Runs one client command (`args[0]` is its name) at `now_ms` on the instance's clock.
    pub fn exec(&mut self, args: &[Vec<u8>], now_ms: u64) -> Reply {
        let Some((name, rest)) = args.split_first() else { return Reply::err("empty command") };
        let lower = String::from_utf8_lossy(name).to_ascii_lowercase();
        match lower.as_str() {
            "eval" | "evalsha" => self.scripts.eval(&mut self.data, lower == "evalsha", rest, now_ms),
            "script" => self.scripts.script(rest),
            _ => data_command(&mut self.data, name, rest, now_ms, false),
        }
    }
}

/// A data command from a client or from a script: arity, the replica's refusal of writes, then
/// the keyspace.
fn data_command(data: &mut Keyspace, name: &[u8], args: &[Vec<u8>], now_ms: u64, in_script: bool) -> Reply {
    let lower = String::from_utf8_lossy(name).to_ascii_lowercase();
    let Some((arity, writes)) = spec(&lower) else {
        if in_script && matches!(lower.as_str(), "eval" | "evalsha" | "script") {
            return Reply::err("This Redis command is not allowed from script");
        }
        if in_script {
            return Reply::err("Unknown Redis command called from script");
        }
        let shown: String = args.iter().take(3).map(|a| format!("'{}' ", String::from_utf8_lossy(a))).collect();
        return Reply::err(&format!(
            "unknown command '{}', with args beginning with: {shown}",
            String::from_utf8_lossy(name)
        ));
    };
    let given = args.len() as i64 + 1;
    if (arity > 0 && given != arity) || (arity < 0 && given < -arity) {
        if in_script {
            return Reply::err("Wrong number of args calling Redis command from script");
        }
        return Reply::err(&format!("wrong number of arguments for '{lower}' command"));
    }
    if writes && data.role == Role::Replica {
        return Reply::Error("READONLY You can't write against a read only replica.".into());
    }
    data.exec(&lower, args, now_ms)
}

#[cfg(test)]
mod tests;
