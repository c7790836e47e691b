//! `--json` (`run`, `check`, `selftest`; `list` writes its own): one JSON document on stdout, for
//! scripts.
//! While the command runs, stdout points at stderr, so every line meant for a person (results,
//! repro lines, the live display) still reaches the terminal or the log and none reaches the
//! document; the document alone goes to the real stdout at the end, also when the command failed
//! (`{"error": ..., "exit": N}`).

use std::fs::File;
use std::io::Write;
use std::path::Path;

/// The real stdout, kept while stdout points at stderr.
#[derive(Debug)]
pub struct JsonOut(File);

impl JsonOut {
    /// Keeps the real stdout and points stdout at stderr.
    ///
    /// # Errors
    /// The descriptors cannot be duplicated.
    pub fn begin() -> std::io::Result<Self> {
        std::io::stdout().flush()?;
        let real = rustix::io::dup(std::io::stdout())?;
        rustix::stdio::dup2_stdout(std::io::stderr())?;
        Ok(Self(File::from(real)))
    }

    /// Writes the one document and a newline to the real stdout.
    ///
    /// # Errors
    /// The document cannot be written.
    pub fn emit(mut self, doc: &serde_json::Value) -> std::io::Result<()> {
        std::io::stdout().flush()?;
        serde_json::to_writer_pretty(&mut self.0, doc)?;
        writeln!(self.0)?;
        self.0.flush()
    }
}

/// The JSON document in `file`.
///
/// # Errors
/// It cannot be read or is not JSON.
pub fn file_document(file: &Path) -> Result<serde_json::Value, String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", file.display()))
}

/// A suite's document: its summary.json, with `selftest.json`'s rows under `selftest` when the
/// suite is a self-test's.
///
/// # Errors
/// The suite directory holds no readable summary.json.
pub fn suite_document(dir: &Path) -> Result<serde_json::Value, String> {
    let mut doc = file_document(&dir.join("summary.json"))?;
    let rows = dir.join("selftest.json");
    if rows.is_file() {
        if let Some(o) = doc.as_object_mut() {
            o.insert("selftest".into(), file_document(&rows)?);
        }
    }
    if let Some(o) = doc.as_object_mut() {
        o.insert("suite_dir".into(), dir.display().to_string().into());
    }
    Ok(doc)
}
