//! The Docker API connection (bollard, as re-exported by testcontainers), with the API version
//! negotiated (the engines here speak 1.41) and a reachability check that names the fix.

use std::time::Duration;

use testcontainers::bollard::Docker;

use crate::error::HarnessError;

/// Labels on everything the harness creates, so a later run or `clean` can find leftovers.
pub const LABEL_MANAGED: &str = "io.leasequake.managed";
/// Which image of ours an image is.
pub const LABEL_IMAGE: &str = "io.leasequake.image";
/// The hash of an image's inputs.
pub const LABEL_INPUTS: &str = "io.leasequake.inputs";

const PING_TIMEOUT: Duration = Duration::from_secs(5);

/// Connects to the local Docker daemon (DOCKER_HOST or the default socket) and checks it answers.
pub async fn connect() -> Result<Docker, HarnessError> {
    checked(Docker::connect_with_local_defaults()).await
}

/// Connects to the daemon at a unix socket `path` and checks it answers.
pub async fn connect_socket(path: &str) -> Result<Docker, HarnessError> {
    checked(Docker::connect_with_socket(path, PING_TIMEOUT.as_secs(), testcontainers::bollard::API_DEFAULT_VERSION))
        .await
}

async fn checked(docker: Result<Docker, testcontainers::bollard::errors::Error>) -> Result<Docker, HarnessError> {
    let unavailable = |detail: String| HarnessError::DockerUnavailable { detail };
    let docker = docker.map_err(|e| unavailable(e.to_string()))?;
    let docker = tokio::time::timeout(PING_TIMEOUT, docker.negotiate_version())
        .await
        .map_err(|_| unavailable(format!("no answer within {PING_TIMEOUT:?}")))?
        .map_err(|e| unavailable(e.to_string()))?;
    tokio::time::timeout(PING_TIMEOUT, docker.ping())
        .await
        .map_err(|_| unavailable(format!("no answer to ping within {PING_TIMEOUT:?}")))?
        .map_err(|e| unavailable(e.to_string()))?;
    Ok(docker)
}
