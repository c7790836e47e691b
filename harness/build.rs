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
    harness_commit();
}

/// The commit this harness is built from (`LEASEQUAKE_COMMIT`, empty outside a git checkout), so a
/// report names the harness that judged it, not the repository it was started from. Rebuilt when
/// HEAD or its branch moves (uncommitted changes are not tracked: cargo would rebuild on every
/// edit).
fn harness_commit() {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_default();
    println!("cargo:rustc-env=LEASEQUAKE_COMMIT={commit}");
    // Only files that exist: a missing one would make cargo run this script on every build.
    for rel in ["HEAD", "packed-refs"] {
        if let Some(p) = git(&["rev-parse", "--git-path", rel]).map(PathBuf::from).filter(|p| p.exists()) {
            println!("cargo:rerun-if-changed={}", p.display());
        }
    }
    if let Some(p) = git(&["symbolic-ref", "-q", "HEAD"]) {
        if let Some(p) = git(&["rev-parse", "--git-path", &p]).map(PathBuf::from).filter(|p| p.exists()) {
            println!("cargo:rerun-if-changed={}", p.display());
        }
    }
}
