//! Stage 2a: the environment a run acts in. The Docker connection (`docker`), the images built
//! locally from files (`image`), the per-run containers and networks (`env`), and a local
//! redis-server for the demo (`local_redis`).

pub mod docker;
pub mod env;
pub mod image;
pub mod local_redis;
