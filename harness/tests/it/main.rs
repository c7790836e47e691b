//! Integration tests of the `leasequake` binary and library.

mod demo;
mod image;
mod nodes;
mod protocol_doc;
