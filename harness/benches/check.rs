//! `cargo bench -p leasequake --bench check`: the checker on a generated history of 1 M events
//! (rounds of node events and audit records from three nodes, with losses, fenced rejections,
//! faults and observer samples). Prints the time against the target (< 1 s); asserts nothing.

use std::time::Instant;

use leasequake::bench::{as_read, synthetic_history as generate};
use leasequake::check::check_read;

const EVENTS: usize = 1_000_000;

fn main() {
    let started = Instant::now();
    let h = generate(EVENTS);
    // The hash a file's lines get as `leasequake check` reads them (not part of the checker).
    let before_last = as_read(&h);
    let generated = started.elapsed();
    let t = Instant::now();
    let result = check_read(&h, Some(before_last));
    let took = t.elapsed();
    println!("generated {} history lines in {:.2} s", h.len(), generated.as_secs_f64());
    println!(
        "checker: {} lines in {:.3} s  ({:.1} M lines/s)   target < 1 s for 1 M: ratio {:.2}   verdict {:?}",
        h.len(),
        took.as_secs_f64(),
        h.len() as f64 / took.as_secs_f64() / 1e6,
        took.as_secs_f64() / (h.len() as f64 / 1e6),
        result.verdict
    );
    if let Some(why) = result.inconclusive.first() {
        println!("(inconclusive because: {why})");
    }
}
