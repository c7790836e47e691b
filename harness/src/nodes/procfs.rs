//! A process as /proc/PID/stat describes it: its state letter and its start time. The one reader
//! of that file (the pause fault and its benchmark, the environment's owner check).

/// The fields after the command name (which may hold spaces and parentheses).
fn fields(pid: i64) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    Some(stat.rsplit_once(')')?.1.trim_start().to_owned())
}

/// The state letter of a process (`R`, `S`, `T` stopped, `Z` zombie), if it exists.
#[must_use]
pub fn state(pid: i32) -> Option<char> {
    fields(i64::from(pid))?.chars().next()
}

/// A process's start time in clock ticks since boot (field 22 of /proc/PID/stat).
#[must_use]
pub fn start_ticks(pid: u32) -> Option<u64> {
    fields(i64::from(pid))?.split_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn this_process_runs_and_started_after_boot() {
        let pid = std::process::id();
        assert!(matches!(super::state(pid as i32), Some('R' | 'S')));
        assert!(super::start_ticks(pid).is_some_and(|t| t > 0));
        // A pid beyond pid_max names no process.
        assert_eq!(super::state(i32::MAX), None);
    }
}
