//! Stage 3: what a run leaves. The one time base (`clock`), the history while it is recorded
//! (`recorder`: the node collector, the store's audit log), history.jsonl and verdicts.json
//! (`history`), and the run directory's harness.log (`runlog`).

pub mod clock;
pub mod history;
pub(crate) mod recorder;
pub mod runlog;
