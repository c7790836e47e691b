//! `HarnessError`: everything the harness library can fail with, each naming the cause and the
//! fix. A safety violation is never one of these: it is data in the report.

use std::path::PathBuf;

/// Errors of the harness library.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// The Docker daemon cannot be reached or speaks an API we cannot use.
    #[error("cannot use the Docker daemon: {detail}. Fix: start it (`systemctl start docker` or `dockerd &`), or point DOCKER_HOST at it")]
    DockerUnavailable {
        /// What went wrong.
        detail: String,
    },
    /// The environment (containers, proxy, store) is not as a run needs it.
    #[error("the environment: {detail}")]
    Environment {
        /// What is wrong and what to do.
        detail: String,
    },
    /// A program the harness packs into an image was not found.
    #[error("`{name}` not found (looked in {looked:?}). Fix: `cargo build --bins` in the checkout, or set {env} to its path")]
    MissingBinary {
        /// The program.
        name: String,
        /// Where we looked.
        looked: Vec<PathBuf>,
        /// The environment variable that overrides the search.
        env: String,
    },
    /// A node broke the node protocol (or could not speak it).
    #[error("node protocol: {detail}")]
    NodeProtocol {
        /// What was wrong.
        detail: String,
    },
    /// A history or verdicts file could not be read or written.
    #[error("{path}: {detail}")]
    History {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        detail: String,
    },
    /// A command line, a file or a directory the user can fix (exit 2).
    #[error("{detail}")]
    Usage {
        /// What is wrong and what to do.
        detail: String,
    },
    /// A local file or process operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The cause.
        source: std::io::Error,
    },
    /// Building an image failed.
    #[error("building image `{image}` failed: {detail}")]
    ImageBuild {
        /// The image.
        image: String,
        /// What went wrong.
        detail: String,
    },
}

impl HarnessError {
    /// An input the user can fix.
    pub fn usage(detail: impl Into<String>) -> Self {
        Self::Usage { detail: detail.into() }
    }

    /// A local I/O failure while doing `what`.
    pub fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Self {
        let what = what.into();
        move |source| Self::Io { what, source }
    }
}
