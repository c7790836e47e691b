//! Commands around the stages: the self-test (`selftest`), benchmarks (`bench`), the
//! environment check (`doctor`), and the contention demo (`demo`).

pub mod bench;
pub mod demo;
pub mod doctor;
pub mod selftest;
