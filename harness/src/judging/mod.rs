//! Stage 4: the checker. A history in, verdicts and metrics out; pure.

pub mod check;
