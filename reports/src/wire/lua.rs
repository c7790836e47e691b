//! Reads a Lua script the way a reviewer skims a lock library's scripts: which `redis.call`s it
//! makes on which `KEYS[i]`, with which literal options (`NX`, `PX`), which `ARGV[j]` it
//! compares the key's value with, and which literal it returns when that comparison fails or
//! holds. No Lua is run and no control flow followed: a script that does its work in a way these
//! patterns do not show is left unread, and the caller says so.

/// One argument of a `redis.call`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Arg {
    /// A string literal, upper-cased (`'NX'`, `"px"` -> `PX`).
    Lit(String),
    /// `KEYS[i]` (1-based).
    Key(usize),
    /// `ARGV[j]` (1-based), also inside `tonumber(...)`.
    Argv(usize),
    /// Anything else (a number, a local, an expression).
    Expr,
}

/// One `redis.call` or `redis.pcall`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Call {
    /// The command, upper-cased.
    pub cmd: String,
    /// Its arguments after the command.
    pub args: Vec<Arg>,
}

impl Call {
    /// Whether its first argument is `KEYS[key]`.
    pub fn on(&self, key: usize) -> bool {
        self.args.first() == Some(&Arg::Key(key))
    }

    /// Whether a literal option `opt` is among its arguments.
    pub fn has(&self, opt: &str) -> bool {
        self.args.iter().any(|a| matches!(a, Arg::Lit(l) if l == opt))
    }

    /// The argument after the literal `opt` (`PX ARGV[2]` -> `ARGV[2]`).
    pub fn after(&self, opt: &str) -> Option<&Arg> {
        let i = self.args.iter().position(|a| matches!(a, Arg::Lit(l) if l == opt))?;
        self.args.get(i + 1)
    }
}

/// The most calls read from one script (a lock's scripts make a handful).
const CALLS_MAX: usize = 64;

/// The `redis.call`s of `src`, in the order written.
pub(crate) fn calls(src: &str) -> Vec<Call> {
    let mut out = Vec::new();
    let mut rest = src;
    while out.len() < CALLS_MAX {
        let Some(at) = next_call(rest) else { break };
        rest = &rest[at..];
        let Some(open) = rest.find('(') else { break };
        let Some((inner, len)) = balanced(&rest[open..]) else { break };
        let mut parts = split_args(inner).into_iter();
        if let Some(Arg::Lit(cmd)) = parts.next() {
            out.push(Call { cmd, args: parts.collect() });
        }
        rest = &rest[open + len..];
    }
    out
}

fn next_call(s: &str) -> Option<usize> {
    let a = s.find("redis.call");
    let b = s.find("redis.pcall");
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The text inside the parenthesis `s` starts with, and the length up to and including its
/// closing one; quotes respected.
fn balanced(s: &str) -> Option<(&str, usize)> {
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        match quote {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == q {
                    quote = None;
                }
            }
            None => match c {
                '\'' | '"' => quote = Some(c),
                '(' => depth += 1,
                ')' => {
                    depth = depth.checked_sub(1)?;
                    if depth == 0 {
                        return Some((&s[1..i], i + 1));
                    }
                }
                _ => {}
            },
        }
    }
    None
}

fn split_args(inner: &str) -> Vec<Arg> {
    let mut out = Vec::new();
    let (mut depth, mut start, mut quote) = (0i32, 0usize, None::<char>);
    for (i, c) in inner.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '(' | '[' | '{') => depth += 1,
            (None, ')' | ']' | '}') => depth -= 1,
            (None, ',') if depth == 0 => {
                out.push(arg(&inner[start..i]));
                start = i + 1;
            }
            _ => {}
        }
    }
    if !inner[start..].trim().is_empty() {
        out.push(arg(&inner[start..]));
    }
    out
}

fn arg(text: &str) -> Arg {
    let t = text.trim();
    let quoted = |q: char| t.len() >= 2 && t.starts_with(q) && t.ends_with(q);
    if quoted('\'') || quoted('"') {
        return Arg::Lit(t[1..t.len() - 1].to_ascii_uppercase());
    }
    if let Some(i) = indexed(t, "KEYS[") {
        return Arg::Key(i);
    }
    let inner = t.strip_prefix("tonumber(").and_then(|r| r.strip_suffix(')')).unwrap_or(t).trim();
    match indexed(inner, "ARGV[") {
        Some(j) => Arg::Argv(j),
        None => Arg::Expr,
    }
}

/// `KEYS[3]` -> 3 (the whole text must be the reference).
fn indexed(t: &str, prefix: &str) -> Option<usize> {
    t.strip_prefix(prefix)?.strip_suffix(']')?.trim().parse().ok().filter(|i| *i >= 1)
}

/// The `ARGV[j]` the script compares a key's value with (`== ARGV[1]`, `~= ARGV[1]`,
/// `ARGV[1] == ...`): the lock's token.
pub(crate) fn compared_argv(src: &str) -> Option<usize> {
    let squeezed: String = src.chars().filter(|c| !c.is_whitespace()).collect();
    ["==ARGV[", "~=ARGV["]
        .iter()
        .filter_map(|p| squeezed.find(p).map(|at| (at, at + p.len())))
        .chain(squeezed.match_indices("ARGV[").filter_map(|(at, _)| {
            let close = squeezed[at..].find(']')? + at;
            let after = &squeezed[close + 1..];
            (after.starts_with("==") || after.starts_with("~=")).then_some((at, at + 5))
        }))
        .min_by_key(|(at, _)| *at)
        .and_then(|(_, digits)| squeezed[digits..].split(']').next()?.parse().ok())
}

/// How a script says what happened when it returns literals rather than a command's reply:
/// the literal after `~= ARGV[j] then return` (refused), and the last `return <int>` of the
/// script when that differs (done). `None` when the script returns no such literal.
pub(crate) fn literal_returns(src: &str) -> Option<(i64, i64)> {
    let squeezed: String = src.split_whitespace().collect::<Vec<_>>().join(" ");
    let refused_at = squeezed.find("~= ARGV[")?;
    let after = &squeezed[refused_at..];
    let ret = after.find("then return ")? + "then return ".len();
    let refused: i64 = after[ret..].split(|c: char| !c.is_ascii_digit() && c != '-').next()?.parse().ok()?;
    let done: i64 = squeezed
        .rmatch_indices("return ")
        .find_map(|(at, _)| squeezed[at + 7..].split(|c: char| !c.is_ascii_digit() && c != '-').next()?.parse().ok())?;
    (done != refused).then_some((refused, done))
}

#[cfg(test)]
mod tests;
