//! Integration tests of the `leasequake` binary and library.

mod attach;
mod check_cli;
mod ci_recipes;
mod clock_shim;
mod compose;
mod demo;
mod env;
mod image;
mod nodes;
mod protocol_doc;
mod runner;
mod scenarios;
mod selftest;
mod sim;
