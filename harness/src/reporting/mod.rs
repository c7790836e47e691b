//! Stage 5: the suite's report directory (summary.json, junit.xml, summary.md, report.html).

pub mod report;
