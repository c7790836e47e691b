//! Stage 2b: the processes under test and what they write to. Node processes behind the node
//! protocol (`supervisor`, with `procfs` for their state), the reference node's job in any world
//! (`job`) and as a process (`node`), the vector store whose audit log is the ground truth
//! (`store`), and the embedding model service beside it (`model`).

pub mod job;
pub mod model;
pub mod node;
pub mod procfs;
pub mod store;
pub mod supervisor;
