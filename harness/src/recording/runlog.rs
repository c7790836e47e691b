//! The per-run log: `tracing` events (with their run, scenario, node and fault fields) written to
//! the run directory's `harness.log` while that run is on, whatever the terminal shows. Never
//! secrets: nothing logs a password or a URL with one.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::{Mutex, PoisonError};

static FILE: Mutex<Option<File>> = Mutex::new(None);

/// Sends the log to `path` until the guard drops.
pub fn start(path: &Path) -> Guard {
    *FILE.lock().unwrap_or_else(PoisonError::into_inner) = File::create(path).ok();
    Guard
}

/// Ends the run's log when dropped.
#[derive(Debug)]
pub struct Guard;

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(mut f) = FILE.lock().unwrap_or_else(PoisonError::into_inner).take() {
            let _ = f.flush();
        }
    }
}

/// A `tracing_subscriber` writer for the current run's log (nothing between runs).
#[derive(Debug, Clone, Copy, Default)]
pub struct RunLog;

impl Write for RunLog {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Some(f) = FILE.lock().unwrap_or_else(PoisonError::into_inner).as_mut() {
            f.write_all(buf)?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for RunLog {
    type Writer = RunLog;

    fn make_writer(&'a self) -> Self::Writer {
        RunLog
    }
}
