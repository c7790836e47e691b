//! What a person watching `leasequake run` sees while a scenario runs: on a terminal, one status
//! line redrawn in place (scenario, phase, elapsed, faults applied), cut to the terminal's width;
//! elsewhere (CI logs, pipes), one plain line per phase change and per fault, never control
//! characters. Under `run --parallel` on a terminal, each child sends its status line to the
//! parent (`@status ...` on stderr, [`BOARD_ENV`]) and the parent's [`Board`] keeps one line per
//! running child below the lines that stay.

use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

/// Set by `run --parallel` for its children when its stderr is a terminal: send status lines to
/// the parent's board instead of drawing.
pub const BOARD_ENV: &str = "LEASEQUAKE_BOARD";
/// What starts a child's status line on its stderr.
pub const STATUS_MARK: &str = "@status ";

/// Where the display goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// A terminal: one line redrawn in place.
    Live,
    /// Plain lines (CI logs, pipes).
    Plain,
    /// A child of `run --parallel`: status lines for the parent's board.
    Board,
    /// Nothing.
    Quiet,
}

#[derive(Debug)]
struct State {
    label: String,
    phase: String,
    started: Instant,
    faults_total: usize,
    faults_applied: usize,
    drawn: bool,
}

/// A handle on the progress display; cheap to clone.
#[derive(Clone, Debug)]
pub struct Progress {
    state: Arc<Mutex<State>>,
    mode: Mode,
}

impl Progress {
    /// A display on stderr: live when stderr is a terminal, plain lines otherwise, status lines
    /// for the parent when a `run --parallel` on a terminal started this process.
    #[must_use]
    pub fn stderr() -> Self {
        let mode = if std::env::var_os(BOARD_ENV).is_some_and(|v| v == "1") {
            Mode::Board
        } else if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            Mode::Live
        } else {
            Mode::Plain
        };
        Self::new(mode)
    }

    /// A display that prints nothing (tests, library callers).
    #[must_use]
    pub fn quiet() -> Self {
        Self::new(Mode::Quiet)
    }

    fn new(mode: Mode) -> Self {
        let state = State {
            label: String::new(),
            phase: String::new(),
            started: Instant::now(),
            faults_total: 0,
            faults_applied: 0,
            drawn: false,
        };
        Self { state: Arc::new(Mutex::new(state)), mode }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A new scenario begins (`label` names it, e.g. `[2/8] owner-cut-from-redis`).
    pub fn scenario(&self, label: &str, faults_total: usize) {
        let mut st = self.lock();
        st.label = label.to_owned();
        st.phase = "starting".into();
        st.started = Instant::now();
        st.faults_total = faults_total;
        st.faults_applied = 0;
        drop(st);
        self.phase("starting the environment");
    }

    /// The scenario moved to `phase`.
    pub fn phase(&self, phase: &str) {
        let mut st = self.lock();
        st.phase = phase.to_owned();
        if matches!(self.mode, Mode::Live | Mode::Board) {
            drop(st);
            self.redraw();
        } else if self.mode == Mode::Plain {
            let line = format!("{}: {phase} ({:.1} s)", st.label, st.started.elapsed().as_secs_f64());
            drop(st);
            eprintln!("{line}");
        }
    }

    /// A fault event (`verified`, `failed`, `healed`) to mention.
    pub fn fault(&self, text: &str, applied: bool) {
        let mut st = self.lock();
        if applied {
            st.faults_applied += 1;
        }
        let line = format!("{}: {text} ({:.1} s)", st.label, st.started.elapsed().as_secs_f64());
        drop(st);
        self.println(&line);
    }

    /// Prints a whole line to stderr without tearing the status line.
    pub fn println(&self, line: &str) {
        if self.mode == Mode::Quiet {
            return;
        }
        let mut err = std::io::stderr().lock();
        if self.mode == Mode::Live {
            let _ = write!(err, "\r\x1b[2K");
        }
        let _ = writeln!(err, "{line}");
        drop(err);
        if self.mode == Mode::Live {
            self.redraw();
        }
    }

    /// Clears the status line (before printing a result to stdout).
    pub fn clear(&self) {
        let mut st = self.lock();
        if self.mode == Mode::Live && st.drawn {
            let _ = write!(std::io::stderr().lock(), "\r\x1b[2K");
            st.drawn = false;
        }
    }

    fn redraw(&self) {
        if !matches!(self.mode, Mode::Live | Mode::Board) {
            return;
        }
        let mut st = self.lock();
        if st.label.is_empty() {
            return;
        }
        let line = format!(
            "{}  {}  {:>5.1} s  faults {}/{}",
            st.label,
            st.phase,
            st.started.elapsed().as_secs_f64(),
            st.faults_applied,
            st.faults_total
        );
        if self.mode == Mode::Board {
            let _ = writeln!(std::io::stderr().lock(), "{STATUS_MARK}{line}");
            return;
        }
        let _ = write!(std::io::stderr().lock(), "\r\x1b[2K{}", fitted(&line, terminal_width()));
        st.drawn = true;
    }

    /// Redraws the live line every 250 ms (a board's status every second) until `stop`; returns
    /// at once for plain lines.
    pub async fn tick(self, stop: CancellationToken) {
        let every = match self.mode {
            Mode::Live => Duration::from_millis(250),
            Mode::Board => Duration::from_secs(1),
            Mode::Plain | Mode::Quiet => return,
        };
        // Bounded by `stop`.
        loop {
            tokio::select! {
                () = stop.cancelled() => break,
                () = tokio::time::sleep(every) => self.redraw(),
            }
        }
        self.clear();
    }
}

/// `run --parallel` on a terminal: one live line per child (its latest status, cut to the width)
/// at the bottom, and above it every line that stays (results, faults, warnings), printed whole.
#[derive(Debug)]
pub struct Board {
    /// Per child its status line ("" when it has none yet or is done), and the lines drawn.
    state: Mutex<(Vec<String>, usize)>,
    prefixes: Vec<String>,
}

impl Board {
    /// A board for `n` children, prefixed `[k/n]`.
    #[must_use]
    pub fn new(n: u32) -> Self {
        let prefixes = (1..=n).map(|k| format!("[{k}/{n}] ")).collect();
        Self { state: Mutex::new((vec![String::new(); n as usize], 0)), prefixes }
    }

    /// Child `k`'s (0-based) status changed.
    pub fn status(&self, k: usize, line: &str) {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let mut err = std::io::stderr().lock();
        Self::erase(&mut err, st.1);
        if let Some(slot) = st.0.get_mut(k) {
            line.clone_into(slot);
        }
        st.1 = self.draw(&mut err, &st.0);
    }

    /// A line that stays, from child `k`, printed above the board on stdout.
    pub fn permanent(&self, k: usize, line: &str) {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let mut err = std::io::stderr().lock();
        Self::erase(&mut err, st.1);
        let _ = err.flush();
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{}{line}", self.prefixes.get(k).map_or("", String::as_str));
        let _ = out.flush();
        drop(out);
        st.1 = self.draw(&mut err, &st.0);
    }

    /// Removes the board (every child is done).
    pub fn finish(&self) {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        Self::erase(&mut std::io::stderr().lock(), st.1);
        st.1 = 0;
    }

    fn erase(err: &mut impl Write, drawn: usize) {
        if drawn > 0 {
            let _ = write!(err, "\x1b[{drawn}A\r\x1b[J");
        }
    }

    /// Draws the non-empty slots, one line each; returns how many lines it drew.
    fn draw(&self, err: &mut impl Write, slots: &[String]) -> usize {
        let width = terminal_width();
        let mut drawn = 0;
        for (k, line) in slots.iter().enumerate().filter(|(_, l)| !l.is_empty()) {
            let prefix = self.prefixes.get(k).map_or("", String::as_str);
            let _ = writeln!(err, "{}", fitted(&format!("{prefix}{line}"), width));
            drawn += 1;
        }
        let _ = err.flush();
        drawn
    }
}

/// The terminal's width in columns (stderr's), else `COLUMNS`, else 80.
#[must_use]
pub fn terminal_width() -> usize {
    rustix::termios::tcgetwinsize(std::io::stderr())
        .ok()
        .map(|w| usize::from(w.ws_col))
        .filter(|w| *w > 0)
        .or_else(|| std::env::var("COLUMNS").ok().and_then(|c| c.parse().ok()))
        .unwrap_or(80)
}

/// `line` cut to fit `width` columns with room for the cursor (a line that wraps leaves debris
/// when it is redrawn), its end marked with an ellipsis when cut.
#[must_use]
pub fn fitted(line: &str, width: usize) -> String {
    let room = width.saturating_sub(1).max(1);
    if line.chars().count() <= room {
        return line.to_owned();
    }
    let mut cut: String = line.chars().take(room.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::fitted;

    #[test]
    fn a_live_line_never_wraps() {
        assert_eq!(fitted("short", 80), "short");
        let long = "[3/16] owner-paused-longer-than-ttl  checking the history  12.3 s  faults 2/3";
        let cut = fitted(long, 40);
        assert_eq!(cut.chars().count(), 39, "one column left for the cursor");
        assert!(cut.ends_with('…') && long.starts_with(cut.trim_end_matches('…')));
        assert_eq!(fitted(long, 0).chars().count(), 1);
    }
}
