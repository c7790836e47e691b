//! Scripts: `EVAL`, `EVALSHA` and `SCRIPT`, run in Lua 5.1 as Redis runs them. A script is
//! compiled once per SHA-1 as a chunk named `@user_script`, called with `KEYS` and `ARGV` set, and
//! runs atomically: `redis.call` and `redis.pcall` reach the keyspace directly, no other command
//! runs in between. The conversions between Lua and replies follow Redis's rules (a Lua number is
//! an integer reply, truncated; `false` is nil; a table with `err` or `ok` is an error or status;
//! an array stops at its first nil; nil replies come back to Lua as `false`).

use std::collections::BTreeMap;

use mlua::{Function, HookTriggers, Lua, MultiValue, Table, Value, VmState};

use super::keyspace::{parse_i64, Keyspace, Role};
use super::{data_command, Reply};

/// A script's instruction budget: Redis stops a busy script after 5 s; the model stops one that
/// runs away (the lease's scripts take a few dozen instructions).
const INSTRUCTION_LIMIT: u32 = 10_000_000;

/// The Lua state and the script cache of one instance.
pub(super) struct Scripts {
    lua: Lua,
    /// Compiled scripts by their SHA-1 (lowercase hex).
    by_sha: BTreeMap<String, Function>,
}

impl Scripts {
    pub fn new() -> Self {
        let lua = Lua::new();
        let _ = install_library(&lua);
        lua.set_app_data(Call { data: Keyspace::new(Role::Primary), now_ms: 0, raised_at: None, budget: 0 });
        lua.set_hook(HookTriggers::new().every_nth_instruction(10_000), |lua, _| budget(lua));
        Self { lua, by_sha: BTreeMap::new() }
    }

    /// `EVAL script numkeys key... arg...` or `EVALSHA sha numkeys ...`.
    pub fn eval(&mut self, data: &mut Keyspace, by_sha: bool, args: &[Vec<u8>], now_ms: u64) -> Reply {
        let name = if by_sha { "evalsha" } else { "eval" };
        if args.len() < 2 {
            return Reply::err(&format!("wrong number of arguments for '{name}' command"));
        }
        let Some(numkeys) = parse_i64(&args[1]) else { return Reply::err("value is not an integer or out of range") };
        if numkeys < 0 {
            return Reply::err("Number of keys can't be negative");
        }
        let rest = &args[2..];
        let Some(numkeys) = usize::try_from(numkeys).ok().filter(|n| *n <= rest.len()) else {
            return Reply::err("Number of keys can't be greater than number of args");
        };
        let (sha, f) = if by_sha {
            let sha = String::from_utf8_lossy(&args[0]).to_ascii_lowercase();
            match self.by_sha.get(&sha) {
                Some(f) => (sha, f.clone()),
                None => return Reply::Error("NOSCRIPT No matching script. Please use EVAL.".into()),
            }
        } else {
            match self.load(&args[0]) {
                Ok(loaded) => loaded,
                Err(reply) => return reply,
            }
        };
        self.run(data, &sha, &f, (&rest[..numkeys], &rest[numkeys..]), now_ms)
    }

    /// `SCRIPT LOAD | EXISTS | FLUSH`.
    pub fn script(&mut self, args: &[Vec<u8>]) -> Reply {
        let Some((sub, rest)) = args.split_first() else {
            return Reply::err("wrong number of arguments for 'script' command");
        };
        match (String::from_utf8_lossy(sub).to_ascii_uppercase().as_str(), rest) {
            ("LOAD", [body]) => self.load(body).map_or_else(|e| e, |(sha, _)| Reply::bulk(sha)),
            ("EXISTS", shas) if !shas.is_empty() => Reply::Array(
                shas.iter()
                    .map(|s| {
                        Reply::Int(i64::from(
                            self.by_sha.contains_key(&String::from_utf8_lossy(s).to_ascii_lowercase()),
                        ))
                    })
                    .collect(),
            ),
            ("FLUSH", []) => {
                *self = Self::new();
                Reply::ok()
            }
            ("LOAD" | "EXISTS" | "FLUSH", _) => Reply::err(&format!(
                "wrong number of arguments for 'script|{}' command",
                String::from_utf8_lossy(sub).to_ascii_lowercase()
            )),
            (other, _) => Reply::err(&format!("unknown subcommand '{other}'. Try SCRIPT HELP.")),
        }
    }

    /// Compiles `body` (once per SHA-1) and caches it.
    fn load(&mut self, body: &[u8]) -> Result<(String, Function), Reply> {
        let sha = sha1_smol::Sha1::from(body).digest().to_string();
        if let Some(f) = self.by_sha.get(&sha) {
            return Ok((sha, f.clone()));
        }
        let f = self
            .lua
            .load(body)
            .set_name("@user_script")
            .into_function()
            .map_err(|e| Reply::err(&format!("Error compiling script (new function): {}", message(&e))))?;
        self.by_sha.insert(sha.clone(), f.clone());
        Ok((sha, f))
    }

    /// Calls a compiled script with its keys and arguments; `redis.call` and `redis.pcall` run
    /// against `data` for the length of the call (lent to the Lua state's [`Call`] and taken
    /// back after).
    fn run(
        &self,
        data: &mut Keyspace,
        sha: &str,
        f: &Function,
        (keys, argv): (&[Vec<u8>], &[Vec<u8>]),
        now_ms: u64,
    ) -> Reply {
        let lua = &self.lua;
        if let Some(mut call) = lua.app_data_mut::<Call>() {
            std::mem::swap(&mut call.data, data);
            call.now_ms = now_ms;
            call.raised_at = None;
            call.budget = 0;
        }
        let outcome = self.set_arguments(keys, argv).and_then(|()| f.call::<Value>(())).map(|v| to_reply(&v));
        let raised_at = lua.app_data_mut::<Call>().and_then(|mut call| {
            std::mem::swap(&mut call.data, data);
            call.raised_at
        });
        match outcome {
            Ok(reply) => reply,
            Err(e) => {
                let text = message(&e);
                let line = raised_at.or_else(|| script_line(&text)).unwrap_or(1);
                let coded = text.split_whitespace().next().is_some_and(|w| w.chars().all(|c| c.is_ascii_uppercase()));
                let text = if coded { text } else { format!("ERR {text}") };
                Reply::Error(format!("{text} script: {sha}, on @user_script:{line}."))
            }
        }
    }

    /// `KEYS` and `ARGV`, new tables for each call (a script may have changed the last ones).
    fn set_arguments(&self, keys: &[Vec<u8>], argv: &[Vec<u8>]) -> mlua::Result<()> {
        let globals = self.lua.globals();
        globals.raw_set("KEYS", strings(&self.lua, keys)?)?;
        globals.raw_set("ARGV", strings(&self.lua, argv)?)
    }
}

/// What `redis.call` reaches while a script runs: the instance's keyspace (lent for the call),
/// its clock, the line that raised an error, and the instructions run so far.
struct Call {
    data: Keyspace,
    now_ms: u64,
    /// The script's line that raised, for the error reply (`on @user_script:N.`).
    raised_at: Option<i32>,
    budget: u32,
}

/// `redis.call` (`raise`: an error reply raises a Lua error) and `redis.pcall`.
fn command(lua: &Lua, args: MultiValue, raise: bool) -> mlua::Result<Value> {
    let args = command_args(args)?;
    let reply = {
        let Some(mut call) = lua.app_data_mut::<Call>() else {
            return Err(mlua::Error::RuntimeError("ERR redis.call outside a script".into()));
        };
        let now_ms = call.now_ms;
        match args.split_first() {
            Some((name, rest)) => data_command(&mut call.data, name, rest, now_ms, true),
            None => Reply::err("Please specify at least one argument for this redis lib call"),
        }
    };
    match reply {
        Reply::Error(e) if raise => {
            let line = lua.inspect_stack(1).map(|d| d.curr_line());
            if let Some(mut call) = lua.app_data_mut::<Call>() {
                call.raised_at = line;
            }
            Err(mlua::Error::RuntimeError(e))
        }
        r => to_lua(lua, &r),
    }
}

/// Stops a script that runs away (checked every 10 000 instructions).
fn budget(lua: &Lua) -> mlua::Result<VmState> {
    let Some(mut call) = lua.app_data_mut::<Call>() else { return Ok(VmState::Continue) };
    call.budget = call.budget.saturating_add(10_000);
    if call.budget > INSTRUCTION_LIMIT {
        return Err(mlua::Error::RuntimeError("BUSY the model stopped a script that ran too long".into()));
    }
    Ok(VmState::Continue)
}

/// `redis.call`, `redis.pcall`, `redis.status_reply`, `redis.error_reply`, `redis.sha1hex` and
/// a silent `redis.log`.
fn install_library(lua: &Lua) -> mlua::Result<()> {
    let redis = lua.create_table()?;
    redis.set("call", lua.create_function(|lua, args: MultiValue| command(lua, args, true))?)?;
    redis.set("pcall", lua.create_function(|lua, args: MultiValue| command(lua, args, false))?)?;
    redis.set(
        "status_reply",
        lua.create_function(|lua, s: mlua::String| {
            let t = lua.create_table()?;
            t.set("ok", s)?;
            Ok(t)
        })?,
    )?;
    redis.set(
        "error_reply",
        lua.create_function(|lua, s: mlua::String| {
            let t = lua.create_table()?;
            t.set("err", s)?;
            Ok(t)
        })?,
    )?;
    redis.set(
        "sha1hex",
        lua.create_function(|_, s: mlua::String| Ok(sha1_smol::Sha1::from(&*s.as_bytes()).digest().to_string()))?,
    )?;
    redis.set("log", lua.create_function(|_, _: MultiValue| Ok(()))?)?;
    for (name, level) in [("LOG_DEBUG", 0), ("LOG_VERBOSE", 1), ("LOG_NOTICE", 2), ("LOG_WARNING", 3)] {
        redis.set(name, level)?;
    }
    lua.globals().set("redis", redis)
}

fn strings(lua: &Lua, items: &[Vec<u8>]) -> mlua::Result<Table> {
    let t = lua.create_table_with_capacity(items.len(), 0)?;
    for (i, item) in items.iter().enumerate() {
        // Valid UTF-8 goes onto Lua's stack as it is (no registry reference): the same bytes.
        match std::str::from_utf8(item) {
            Ok(text) => t.raw_set(i + 1, text)?,
            Err(_) => t.raw_set(i + 1, lua.create_string(item)?)?,
        }
    }
    Ok(t)
}

/// A `redis.call`'s arguments as bytes: strings as they are, numbers as Lua prints them.
fn command_args(args: MultiValue) -> mlua::Result<Vec<Vec<u8>>> {
    args.into_iter()
        .map(|v| match v {
            Value::String(s) => Ok(s.as_bytes().to_vec()),
            Value::Integer(i) => Ok(i.to_string().into_bytes()),
            Value::Number(n) => Ok(lua_number(n).into_bytes()),
            _ => {
                Err(mlua::Error::RuntimeError("ERR Lua redis lib command arguments must be strings or integers".into()))
            }
        })
        .collect()
}

/// A number as Lua 5.1 turns it into a string (`%.14g`).
fn lua_number(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        return format!("{}", n as i64);
    }
    let s = format!("{n:.13e}");
    let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if (-5..14).contains(&exp) {
        let digits = usize::try_from(13 - exp).unwrap_or(0);
        let fixed = format!("{n:.digits$}");
        return fixed.trim_end_matches('0').trim_end_matches('.').to_owned();
    }
    let mantissa = mantissa.trim_end_matches('0').trim_end_matches('.');
    format!("{mantissa}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs())
}

/// A reply as a script sees it.
fn to_lua(lua: &Lua, r: &Reply) -> mlua::Result<Value> {
    Ok(match r {
        Reply::Int(n) => Value::Number(*n as f64),
        Reply::Bulk(b) => Value::String(lua.create_string(b)?),
        Reply::Nil | Reply::NilArray => Value::Boolean(false),
        Reply::Status(s) => {
            let t = lua.create_table()?;
            t.set("ok", s.as_str())?;
            Value::Table(t)
        }
        Reply::Error(e) => {
            let t = lua.create_table()?;
            t.set("err", e.as_str())?;
            Value::Table(t)
        }
        Reply::Array(items) => {
            let t = lua.create_table()?;
            for (i, item) in items.iter().enumerate() {
                t.raw_set(i + 1, to_lua(lua, item)?)?;
            }
            Value::Table(t)
        }
    })
}

/// A script's return value as a reply.
fn to_reply(v: &Value) -> Reply {
    match v {
        Value::Boolean(true) => Reply::Int(1),
        Value::Integer(i) => Reply::Int(*i),
        Value::Number(n) => Reply::Int(*n as i64),
        Value::String(s) => Reply::Bulk(s.as_bytes().to_vec()),
        Value::Table(t) => {
            if let Ok(Value::String(e)) = t.get::<Value>("err") {
                return Reply::Error(e.to_string_lossy());
            }
            if let Ok(Value::String(s)) = t.get::<Value>("ok") {
                return Reply::Status(s.to_string_lossy());
            }
            let mut items = Vec::new();
            for i in 1.. {
                match t.raw_get::<Value>(i) {
                    Ok(Value::Nil) | Err(_) => break,
                    Ok(v) => items.push(to_reply(&v)),
                }
            }
            Reply::Array(items)
        }
        _ => Reply::Nil,
    }
}

/// The line a Lua error message names (`user_script:N: ...`).
fn script_line(text: &str) -> Option<i32> {
    text.strip_prefix("user_script:")?.split(':').next()?.parse().ok()
}

/// The message of a Lua error, through the callback layers mlua wraps it in, without the
/// traceback mlua appends (an error reply is one line).
fn message(e: &mlua::Error) -> String {
    match e {
        mlua::Error::RuntimeError(m) => {
            m.split("\nstack traceback:").next().unwrap_or_default().replace(['\r', '\n'], " ")
        }
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        mlua::Error::CallbackError { cause, .. } => self::message(cause),
        other => other.to_string(),
    }
}
