//! What a person watching `leasequake run` sees while a scenario runs: on a terminal, one status
//! line redrawn in place (scenario, phase, elapsed, faults applied); elsewhere (CI logs, pipes),
//! one plain line per phase change and per fault, never control characters.

use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

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
    tty: bool,
    quiet: bool,
}

impl Progress {
    /// A display on stderr: live when stderr is a terminal, plain lines otherwise.
    #[must_use]
    pub fn stderr() -> Self {
        Self::new(std::io::IsTerminal::is_terminal(&std::io::stderr()), false)
    }

    /// A display that prints nothing (tests, library callers).
    #[must_use]
    pub fn quiet() -> Self {
        Self::new(false, true)
    }

    fn new(tty: bool, quiet: bool) -> Self {
        let state = State {
            label: String::new(),
            phase: String::new(),
            started: Instant::now(),
            faults_total: 0,
            faults_applied: 0,
            drawn: false,
        };
        Self { state: Arc::new(Mutex::new(state)), tty, quiet }
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
        if self.tty {
            drop(st);
            self.redraw();
        } else if !self.quiet {
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
        if self.quiet {
            return;
        }
        let mut err = std::io::stderr().lock();
        if self.tty {
            let _ = write!(err, "\r\x1b[2K");
        }
        let _ = writeln!(err, "{line}");
        drop(err);
        if self.tty {
            self.redraw();
        }
    }

    /// Clears the status line (before printing a result to stdout).
    pub fn clear(&self) {
        let mut st = self.lock();
        if self.tty && st.drawn {
            let _ = write!(std::io::stderr().lock(), "\r\x1b[2K");
            st.drawn = false;
        }
    }

    fn redraw(&self) {
        if !self.tty || self.quiet {
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
        let _ = write!(std::io::stderr().lock(), "\r\x1b[2K{line}");
        st.drawn = true;
    }

    /// Redraws the live line every 250 ms until `stop` (terminals only; returns at once otherwise).
    pub async fn tick(self, stop: CancellationToken) {
        if !self.tty || self.quiet {
            return;
        }
        // Bounded by `stop`.
        loop {
            tokio::select! {
                () = stop.cancelled() => break,
                () = tokio::time::sleep(Duration::from_millis(250)) => self.redraw(),
            }
        }
        self.clear();
    }
}
