//! `leasequake doctor`: checks what a run needs and says what to fix. Each check is one line:
//! ok, or the problem and the fix. Changes nothing but a probe network it removes at once.

use std::collections::HashMap;

use testcontainers::bollard::models::{Ipam, IpamConfig, NetworkCreateRequest};
use testcontainers::bollard::query_parameters::{ListContainersOptionsBuilder, ListNetworksOptionsBuilder};
use testcontainers::bollard::Docker;

use crate::docker::LABEL_MANAGED;
use crate::env::{LABEL_PID, LABEL_PID_START};
use crate::image::{ImageSpec, STABLE_TAG};
use crate::procfs::start_ticks;

/// One check's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// What was checked.
    pub check: &'static str,
    /// `None` when fine; else the problem and its fix.
    pub problem: Option<String>,
    /// What was seen.
    pub detail: String,
}

fn ok(check: &'static str, detail: impl Into<String>) -> Finding {
    Finding { check, problem: None, detail: detail.into() }
}

fn bad(check: &'static str, problem: impl Into<String>) -> Finding {
    Finding { check, problem: Some(problem.into()), detail: String::new() }
}

fn on_path(program: &str) -> bool {
    std::process::Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Runs every check.
pub async fn run() -> Vec<Finding> {
    let docker = match crate::docker::connect().await {
        Ok(d) => d,
        Err(e) => return vec![bad("docker", e.to_string())],
    };
    let mut out = vec![engine(&docker).await, address_pool(&docker).await];
    out.extend(images(&docker).await);
    out.push(leftovers(&docker).await);
    out.extend(tools());
    out
}

/// The engine answers with API 1.41 or newer.
async fn engine(docker: &Docker) -> Finding {
    match docker.version().await {
        Ok(v) => {
            let api = v.api_version.unwrap_or_default();
            let new_enough = api.split('.').nth(1).and_then(|m| m.parse::<u32>().ok()).is_some_and(|m| m >= 41);
            if new_enough {
                ok("docker", format!("engine {} (API {api})", v.version.unwrap_or_default()))
            } else {
                bad("docker", format!("API {api} is older than 1.41: upgrade the Docker engine"))
            }
        }
        Err(e) => bad("docker", format!("no version answer: {e}")),
    }
}

/// The address pool: can a labelled /28 be created?
async fn address_pool(docker: &Docker) -> Finding {
    let name = format!("leasequake-doctor-{}", std::process::id());
    let probe = NetworkCreateRequest {
        name: name.clone(),
        labels: Some(HashMap::from([(LABEL_MANAGED.to_owned(), "true".to_owned())])),
        ipam: Some(Ipam {
            config: Some(vec![IpamConfig { subnet: Some("172.19.255.240/28".into()), ..Default::default() }]),
            ..Default::default()
        }),
        ..Default::default()
    };
    match docker.create_network(probe).await {
        Ok(_) => {
            let _ = docker.remove_network(&name).await;
            ok("address pool", "a labelled /28 network can be created")
        }
        Err(e) => bad("address pool", format!("cannot create a small network ({e}): remove unused networks (`docker network prune`, `leasequake clean`)")),
    }
}

/// Each image present, or how to build it.
async fn images(docker: &Docker) -> Vec<Finding> {
    let mut out = Vec::new();
    for (repo, spec) in [
        ("leasequake/redis", "redis"),
        ("leasequake/toxiproxy", "toxiproxy"),
        ("leasequake/vector-store", "vector-store"),
    ] {
        let tag = format!("{repo}:{STABLE_TAG}");
        if docker.inspect_image(&tag).await.is_ok() {
            out.push(ok("image", format!("{tag} present")));
        } else {
            let buildable = match spec {
                "redis" => on_path("apt-get") && on_path("dpkg-deb"),
                "toxiproxy" => ImageSpec::proxy().is_ok(),
                _ => ImageSpec::store().is_ok(),
            };
            let fix = if buildable {
                "run `leasequake images build` (or any run builds it)"
            } else {
                "build the workspace (`cargo build --bins`) and make sure apt-get works, then `leasequake images build`"
            };
            out.push(bad("image", format!("{tag} missing: {fix}")));
        }
    }
    out
}

/// Labelled containers of runs whose process is gone.
async fn leftovers(docker: &Docker) -> Finding {
    let filters = HashMap::from([("label", vec![format!("{LABEL_MANAGED}=true")])]);
    let containers = docker
        .list_containers(Some(ListContainersOptionsBuilder::new().all(true).filters(&filters).build()))
        .await
        .unwrap_or_default();
    let networks = docker
        .list_networks(Some(ListNetworksOptionsBuilder::new().filters(&filters).build()))
        .await
        .unwrap_or_default();
    let dead = containers
        .iter()
        .filter(|c| {
            let l = c.labels.clone().unwrap_or_default();
            let pid: Option<u32> = l.get(LABEL_PID).and_then(|p| p.parse().ok());
            pid.is_some_and(|p| start_ticks(p).map(|s| s.to_string()) != l.get(LABEL_PID_START).cloned())
        })
        .count();
    if dead > 0 {
        return bad(
            "leftovers",
            format!(
                "{dead} containers of runs whose process is gone: the next run removes them, or `leasequake clean` now"
            ),
        );
    }
    ok(
        "leftovers",
        format!(
            "{} labelled containers and {} networks, all of live runs or compose",
            containers.len(),
            networks.len()
        ),
    )
}

/// The host tools some commands need.
fn tools() -> Vec<Finding> {
    [
        ("redis-server", "the lease tests and the demo", "apt-get install redis-server (scripts/deps)"),
        ("docker-compose", "docker-compose.yml by hand", "apt-get install docker-compose"),
        ("ldd", "packing images", "apt-get install libc-bin"),
    ]
    .into_iter()
    .map(|(tool, why, fix)| {
        if on_path(tool) {
            ok("tool", format!("{tool} found"))
        } else {
            bad("tool", format!("{tool} not found (needed for {why}): {fix}"))
        }
    })
    .collect()
}
