//! Compiles the Redis image's clock shim (clockshim/clockshim.c) into a shared object the harness
//! embeds and packs into the image: `clock_jump` faults move one Redis instance's wall clock.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let source = "clockshim/clockshim.c";
    println!("cargo:rerun-if-changed={source}");
    println!("cargo:rerun-if-env-changed=CC");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("clockshim.so");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = Command::new(&cc)
        .args(["-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&out)
        .arg(source)
        .status()
        .unwrap_or_else(|e| {
            panic!("cannot run the C compiler `{cc}` for {source} ({e}): install one (scripts/deps installs gcc)")
        });
    assert!(status.success(), "`{cc}` failed on {source}");
}
