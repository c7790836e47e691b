//! Stage 3: what a run leaves. The one time base (`clock`), history.jsonl and verdicts.json
//! (`history`), and the run directory's harness.log (`runlog`).

pub mod clock;
pub mod history;
pub mod runlog;
