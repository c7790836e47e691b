//! The printed command line: every command leasequake prints for a person to run (a repro, a
//! replay, a shrink) names this program the way the person can run it where they are. Run as
//! `scripts/leasequake`, the wrapper says so (`LEASEQUAKE_AS`); found on PATH (an installed
//! binary), its bare name; started by a path, that path as typed. Arguments are quoted for a
//! POSIX shell wherever they need it, so a line runs as printed.

use std::sync::OnceLock;

/// Set by `scripts/leasequake`: how the user runs this program (`scripts/leasequake`, or
/// `cd /their/checkout && scripts/leasequake` when they ran it from elsewhere).
pub const AS_ENV: &str = "LEASEQUAKE_AS";

/// Set by `scripts/leasequake`: the directory it was run from (it runs this program at the
/// checkout's root), whose commit a report records as the caller's.
pub const CALLER_DIR_ENV: &str = "LEASEQUAKE_CALLER_DIR";

/// How a person runs this program from where they started it.
#[must_use]
pub fn program() -> &'static str {
    static PROGRAM: OnceLock<String> = OnceLock::new();
    PROGRAM.get_or_init(|| {
        let wrapper = std::env::var(AS_ENV).ok();
        let argv0 = std::env::args_os().next().map(|a| a.to_string_lossy().into_owned());
        named(wrapper.as_deref(), argv0.as_deref())
    })
}

/// The program that runs containers: this one, or for the self-test build (which runs only
/// `node` and `sim`), the checkout's wrapper.
#[must_use]
pub fn harness_program() -> &'static str {
    if cfg!(feature = "flaws") {
        "scripts/leasequake"
    } else {
        program()
    }
}

/// `program()` from its inputs: the wrapper's word first (it is already shell text), then argv[0].
fn named(wrapper: Option<&str>, argv0: Option<&str>) -> String {
    if let Some(w) = wrapper.filter(|w| !w.trim().is_empty() && !w.chars().any(char::is_control)) {
        return w.to_owned();
    }
    // A bare name was found on PATH and runs again the same way; a path runs from where it was typed.
    argv0.filter(|a| !a.is_empty()).map_or_else(|| "leasequake".to_owned(), quoted)
}

/// `program()` followed by `args`, each quoted where a shell needs it.
#[must_use]
pub fn command<I, S>(args: I) -> String
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let mut line = program().to_owned();
    for a in args {
        line.push(' ');
        line.push_str(&quoted(a.as_ref()));
    }
    line
}

/// `arg` as one word of a POSIX shell: as it is when every character is plain, else in single
/// quotes (a single quote inside written as `'\''`).
#[must_use]
pub fn quoted(arg: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-./:=@%+,".contains(c);
    if !arg.is_empty() && arg.chars().all(plain) {
        arg.to_owned()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::{named, quoted};

    #[test]
    fn the_wrapper_names_itself_else_argv0_as_typed() {
        assert_eq!(named(Some("scripts/leasequake"), Some("/x/target/debug/leasequake")), "scripts/leasequake");
        assert_eq!(named(Some("cd '/a b' && scripts/leasequake"), None), "cd '/a b' && scripts/leasequake");
        assert_eq!(named(Some(""), Some("leasequake")), "leasequake");
        assert_eq!(named(Some("bad\nline"), Some("target/release/leasequake")), "target/release/leasequake");
        assert_eq!(named(None, Some("/opt/my tools/leasequake")), "'/opt/my tools/leasequake'");
        assert_eq!(named(None, None), "leasequake");
    }

    #[test]
    fn words_are_quoted_only_where_a_shell_needs_it() {
        assert_eq!(quoted("reports-out/20261206-021600/01-no-faults"), "reports-out/20261206-021600/01-no-faults");
        assert_eq!(quoted("python3 node.py"), "'python3 node.py'");
        assert_eq!(quoted("it's"), r"'it'\''s'");
        assert_eq!(quoted(""), "''");
        assert_eq!(quoted("$HOME"), "'$HOME'");
    }

    #[test]
    fn a_quoted_line_runs_in_a_shell_as_the_words_it_was_made_of() {
        let words = ["a b", "it's", "$HOME", "plain", "*", "x\"y"];
        let line: Vec<String> = words.iter().map(|w| quoted(w)).collect();
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("printf '%s\\n' {}", line.join(" ")))
            .output()
            .unwrap();
        assert_eq!(String::from_utf8(out.stdout).unwrap(), words.join("\n") + "\n");
    }
}
