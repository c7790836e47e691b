//! Stage 2b: the processes under test and what they write to. Node processes behind the node
//! protocol (`supervisor`, with `procfs` for their state), the reference node's job in any world
//! (`job`) and as a process (`node`), and the vector store whose audit log is the ground truth
//! (`store`).

pub mod job;
pub mod node;
pub mod procfs;
pub mod store;
pub mod supervisor;
