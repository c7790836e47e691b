//! The chaos environment, one per run: Redis primary and replica, three Sentinels, the fault
//! proxy and the vector store, in containers on two labelled networks with small fixed subnets. The
//! client network carries proxy <-> Redis and proxy <-> store traffic. The replication network
//! carries primary <-> replica <-> Sentinels, so either link can be cut alone; replication and
//! Sentinel traffic never pass the fault proxy.
//!
//! Every object carries the project's labels, the run id, and the harness's pid and process start
//! time, so start-up can remove the leftovers of dead runs without touching live ones. `down` (or
//! Drop, as a backstop) removes the run's objects.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use leasequake_toxiproxy::Client as ProxyClient;
use sha2::{Digest, Sha256};
use testcontainers::bollard::container::LogOutput;
use testcontainers::bollard::exec::{CreateExecOptions, StartExecResults};
use testcontainers::bollard::models::{
    ContainerCreateBody, EndpointSettings, HostConfig, Ipam, IpamConfig, NetworkConnectRequest, NetworkCreateRequest,
    NetworkingConfig, PortBinding,
};
use testcontainers::bollard::query_parameters::{
    CreateContainerOptionsBuilder, ListContainersOptionsBuilder, ListNetworksOptionsBuilder,
    RemoveContainerOptionsBuilder,
};
use testcontainers::bollard::Docker;

use crate::docker::LABEL_MANAGED;
use crate::error::HarnessError;
use crate::image::{Built, PROXY_API_PORT, STORE_PORT};

/// The run a labelled object belongs to.
pub const LABEL_RUN: &str = "io.leasequake.run";
/// The pid of the harness that created it.
pub const LABEL_PID: &str = "io.leasequake.pid";
/// That process's start time (clock ticks since boot), so a reused pid is not mistaken for it.
pub const LABEL_PID_START: &str = "io.leasequake.pid-start";
/// What created the object (`run`, `env-up`, `test`), so `env down` removes only `env up`'s.
pub const LABEL_ORIGIN: &str = "io.leasequake.origin";
/// How long attaching waits for a running environment to be ready.
const ATTACH_READY_LIMIT: Duration = Duration::from_secs(15);

/// The name Sentinel monitors the primary under.
pub const MASTER_NAME: &str = "leasequake";
/// The roles of an environment's containers.
pub const ROLES: [&str; 7] =
    ["redis-primary", "redis-replica", "sentinel-1", "sentinel-2", "sentinel-3", "proxy", "store"];
/// The Sentinels' roles.
const SENTINELS: [&str; 3] = ["sentinel-1", "sentinel-2", "sentinel-3"];
/// Sentinel's down-after while an environment starts (the configured one applies once ready).
const STARTUP_DOWN_AFTER_MS: u64 = 10_000;
/// First container port of the proxy's block (three per node: Redis, store, model).
pub const PROXY_PORT_BASE: u16 = 20_000;

/// One of a node's links through the fault proxy: each its own proxy (`n1-redis`, `n1-store`,
/// `n1-model`) and port, in this order in the node's block of ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum NodeLink {
    /// To the Redis primary.
    Redis,
    /// To the vector store.
    Store,
    /// To the embedding model service (the store's container serves it, under `/v1/embed`).
    Model,
}

impl NodeLink {
    /// Every link, in port order.
    pub const ALL: [NodeLink; 3] = [NodeLink::Redis, NodeLink::Store, NodeLink::Model];

    /// `redis`, `store`, `model`: the proxy's name after the node's.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            NodeLink::Redis => "redis",
            NodeLink::Store => "store",
            NodeLink::Model => "model",
        }
    }

    /// Where the proxy forwards, on the client network.
    #[must_use]
    pub fn upstream(self) -> String {
        match self {
            NodeLink::Redis => "redis-primary:6379".into(),
            NodeLink::Store | NodeLink::Model => format!("store:{STORE_PORT}"),
        }
    }

    /// Node `i`'s proxy on this link (`n1-redis`).
    #[must_use]
    pub fn proxy(self, i: u32) -> String {
        format!("n{i}-{}", self.name())
    }

    /// Its place in node `i`'s block of ports (0-based, over every node).
    #[must_use]
    pub fn slot(self, i: u32) -> usize {
        (i.saturating_sub(1) as usize) * NodeLink::ALL.len() + self as usize
    }

    /// The container port node `i`'s proxy on this link listens on.
    #[must_use]
    pub fn listen_port(self, i: u32) -> u16 {
        PROXY_PORT_BASE.saturating_add(u16::try_from(self.slot(i)).unwrap_or(u16::MAX))
    }
}

/// Proxy ports a run of `nodes` nodes needs.
#[must_use]
pub fn proxy_ports_for(nodes: u32) -> usize {
    nodes as usize * NodeLink::ALL.len()
}

/// What to bring up.
#[derive(Debug, Clone)]
pub struct EnvConfig {
    /// How many nodes will need proxies (three ports each).
    pub nodes: u32,
    /// Sentinel `down-after-milliseconds`.
    pub down_after_ms: u64,
    /// Sentinel `failover-timeout`.
    pub failover_timeout_ms: u64,
    /// How long to wait for readiness.
    pub ready_timeout: Duration,
    /// What is creating it (a label value: `run`, `env-up`, `test`).
    pub origin: &'static str,
    /// The store's fencing policy.
    pub store_policy: leasequake_reports::history::StorePolicy,
    /// The images (from `image::ensure`): Redis, proxy, store.
    pub redis_image: Built,
    /// The proxy image.
    pub proxy_image: Built,
    /// The store image.
    pub store_image: Built,
}

/// A running environment.
pub struct Environment {
    docker: Docker,
    /// The run id (in every object's name and labels).
    pub run_id: String,
    password: String,
    origin: &'static str,
    containers: BTreeMap<&'static str, String>,
    /// The proxy's API, from the host.
    pub proxy_api: String,
    /// The store's API, from the host (nodes go through their proxies instead).
    pub store_addr: String,
    /// Host ports of the proxy's port block, in order (container ports from `PROXY_PORT_BASE`).
    pub proxy_ports: Vec<u16>,
    /// Time from the first container's creation to ready.
    pub ready_in: Duration,
    removed: bool,
}

/// One container to start.
struct Spec<'a> {
    role: &'static str,
    image: &'a Built,
    cmd: Vec<String>,
    nets: Vec<&'static str>,
    publish: Vec<u16>,
    /// Whether /data is a tmpfs (see [`SENTINEL_DATA`]).
    data_in_memory: bool,
}

/// Sentinel's data directory, a tmpfs: Sentinel rewrites and fsyncs its config file inside its
/// event loop (at `SENTINEL SET`, discoveries, epochs). Through the container's overlay
/// filesystem, with a disk writer beside it, `SENTINEL SET` took up to 3084 ms (`SENTINEL MASTER`
/// at the same time: at most 63 ms; `SET` on tmpfs: at most 165 ms). A Sentinel that stalls with
/// a ping outstanding counts its own stall as every instance's silence: after one such stall it
/// flagged the primary, the replica and both other Sentinels down at once; two at once are a
/// quorum. Nothing of an environment is meant to outlive it.
const SENTINEL_DATA: &str = "/data";

fn labels(run_id: &str, origin: &str) -> HashMap<String, String> {
    let pid = std::process::id();
    HashMap::from([
        (LABEL_ORIGIN.to_owned(), origin.to_owned()),
        (LABEL_MANAGED.to_owned(), "true".to_owned()),
        (LABEL_RUN.to_owned(), run_id.to_owned()),
        (LABEL_PID.to_owned(), pid.to_string()),
        (LABEL_PID_START.to_owned(), crate::procfs::start_ticks(pid).map(|t| t.to_string()).unwrap_or_default()),
    ])
}

/// Where `env up` keeps the Redis password of environment `run_id` (mode 0600).
#[must_use]
pub fn password_file(run_id: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("leasequake-{run_id}.redis-password"))
}

/// The variable every Redis and Sentinel container is given the password in: it reaches their
/// config files from there, never a command line (any local user can read those with `ps`).
pub const PASSWORD_VAR: &str = "REDIS_PASSWORD";

/// What a Redis container runs first: its password into a config file, from [`PASSWORD_VAR`].
const AUTH_CONF: &str =
    "printf 'requirepass %s\\nmasterauth %s\\n' \"$REDIS_PASSWORD\" \"$REDIS_PASSWORD\" > /data/auth.conf";

/// A redis-server's arguments: the password from `/data/auth.conf` (written at start, see
/// [`AUTH_CONF`]), no persistence, `extra` last.
fn redis_command(extra: &[&str]) -> Vec<String> {
    let mut cmd =
        ["redis-server", "/data/auth.conf", "--protected-mode", "no", "--dir", "/data"].map(str::to_owned).to_vec();
    cmd.extend(["--repl-diskless-sync-delay", "0", "--save", "", "--appendonly", "no"].map(str::to_owned));
    cmd.extend(extra.iter().map(|s| (*s).to_owned()));
    cmd
}

/// A Redis container's command: `prelude` (a shell line), its auth config written, then
/// redis-server with `extra`.
fn redis_container(prelude: &str, extra: &[&str]) -> Vec<String> {
    ["sh".to_owned(), "-c".to_owned(), format!("{prelude}{AUTH_CONF} && exec \"$@\""), "sh".to_owned()]
        .into_iter()
        .chain(redis_command(extra))
        .collect()
}

/// Sentinel `i`'s start script: its config, pre-seeded with the other Sentinels and the replica,
/// written to a file of its own (Sentinel rewrites its config), then redis-sentinel.
fn sentinel_script(name: &str, i: usize, ids: &[String], cfg: &EnvConfig) -> String {
    let mut conf = vec![
        "port 26379".to_owned(),
        "sentinel resolve-hostnames yes".into(),
        "sentinel announce-hostnames yes".into(),
        format!("sentinel announce-ip {name}"),
        format!("sentinel myid {}", ids[i - 1]),
        format!("sentinel monitor {MASTER_NAME} redis-primary 6379 2"),
        // Closed and reopened around the shell's own expansion of the password variable.
        format!("sentinel auth-pass {MASTER_NAME} '\"${PASSWORD_VAR}\"'"),
        // Lenient while the environment starts (a loaded machine can stall a starting Redis past a
        // short down-after: Sentinel would fail over before the run begins); the configured
        // timings are set once everything is ready (`apply_sentinel_timings`).
        format!("sentinel down-after-milliseconds {MASTER_NAME} {}", cfg.down_after_ms.max(STARTUP_DOWN_AFTER_MS)),
        format!("sentinel failover-timeout {MASTER_NAME} {}", cfg.failover_timeout_ms.max(3 * STARTUP_DOWN_AFTER_MS)),
        format!("sentinel known-replica {MASTER_NAME} redis-replica 6379"),
    ];
    for j in (1..=ids.len()).filter(|j| *j != i) {
        conf.push(format!("sentinel known-sentinel {MASTER_NAME} sentinel-{j} 26379 {}", ids[j - 1]));
    }
    format!(
        "printf '%s\\n' {} > /data/sentinel.conf && exec redis-sentinel /data/sentinel.conf",
        conf.iter().map(|l| format!("'{l}'")).collect::<Vec<_>>().join(" ")
    )
}

/// Writes the Redis password of environment `run_id` to [`password_file`], readable by its owner
/// only, for `run --env` and `redis-cli` to read; returns the file.
pub fn write_password_file(run_id: &str, password: &str) -> Result<std::path::PathBuf, HarnessError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let file = password_file(run_id);
    let what = format!("writing the Redis password file {}", file.display());
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(0o600)
        .open(&file)
        .map_err(HarnessError::io(what.clone()))?;
    f.write_all(password.as_bytes()).map_err(HarnessError::io(what))?;
    Ok(file)
}

/// One field of `SENTINEL MASTER`'s answer (redis-cli prints each name, then its value, a line
/// each).
fn master_field<'a>(answer: &'a str, name: &str) -> Option<&'a str> {
    let mut lines = answer.lines().map(str::trim);
    lines.by_ref().find(|l| *l == name)?;
    lines.next()
}

/// Whether a Sentinel's view of one instance (`SENTINEL MASTER` or `SENTINEL REPLICAS` with one
/// replica) says it has answered a ping since the Sentinel started, the last within `within_ms`,
/// and none is outstanding (`last-ping-sent` is 0 only after an answer).
fn heard(view: &str, within_ms: u64) -> bool {
    let ms = |k: &str| master_field(view, k).and_then(|v| v.parse::<u64>().ok());
    ms("last-ping-sent") == Some(0) && ms("last-ok-ping-reply").is_some_and(|ok| ok < within_ms)
}

/// A Docker error as what really happened, with the fix that fits it: the daemon gone is not a
/// port another program took, and neither is a request the daemon refused.
fn docker_err(what: &str, e: impl std::fmt::Display) -> HarnessError {
    let e = e.to_string();
    match DockerTrouble::of(&e) {
        DockerTrouble::PortTaken => HarnessError::Environment {
            detail: format!(
                "{what}: {e}. A port Docker picked on 127.0.0.1 was taken by another program as the container started \
                 ({PORT_TRIES} tries, each with a fresh port): the environment could not start, which says nothing of \
                 the lease. Fix: run again, or find what takes ports (`ss -ltnp`)"
            ),
        },
        DockerTrouble::Gone => HarnessError::DockerUnavailable { detail: format!("{what}: {e}") },
        DockerTrouble::Refused => HarnessError::Environment {
            detail: format!("{what}: the Docker daemon refused it: {e} (`leasequake doctor` checks the engine, the images and leftovers)"),
        },
    }
}

/// How many times a container whose published port was taken is created again.
const PORT_TRIES: u32 = 3;

/// What a Docker error says happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DockerTrouble {
    /// A port it published was taken meanwhile (a transient clash: retried).
    PortTaken,
    /// The daemon cannot be reached any more.
    Gone,
    /// The daemon answered, refusing the request.
    Refused,
}

impl DockerTrouble {
    fn of(e: &str) -> Self {
        let e = e.to_ascii_lowercase();
        if e.contains("address already in use") || e.contains("port is already allocated") {
            Self::PortTaken
        } else if [
            "error trying to connect",
            "connection refused",
            "connection reset",
            "broken pipe",
            "no such file or directory (os error",
        ]
        .iter()
        .any(|m| e.contains(m))
        {
            Self::Gone
        } else {
            Self::Refused
        }
    }
}

impl Environment {
    /// Creates the networks and containers and waits until everything is ready.
    pub async fn up(docker: Docker, cfg: &EnvConfig) -> Result<Self, HarnessError> {
        let run_id = format!("{:08x}", rand::random::<u32>());
        let password = format!("{:032x}", rand::random::<u128>());
        // Leftovers of runs whose process is gone (a SIGKILLed harness); live runs are untouched.
        remove_labelled(&docker, None, true).await?;
        let mut env = Self {
            docker,
            run_id,
            password,
            origin: cfg.origin,
            containers: BTreeMap::new(),
            proxy_api: String::new(),
            store_addr: String::new(),
            proxy_ports: Vec::new(),
            ready_in: Duration::ZERO,
            removed: false,
        };
        let started = Instant::now();
        // On any failure the environment drops and its objects are removed.
        env.create_networks().await?;
        env.create_containers(cfg).await?;
        env.wait_ready(cfg.ready_timeout).await?;
        env.apply_sentinel_timings(cfg).await?;
        env.ready_in = started.elapsed();
        Ok(env)
    }

    /// The name of this run's `client` or `repl` network.
    #[must_use]
    pub fn network(&self, which: &str) -> String {
        format!("lq-{}-{which}", self.run_id)
    }

    async fn create_networks(&self) -> Result<(), HarnessError> {
        // Small fixed subnets: try slot after slot until one is free on this engine.
        for slot in 0..64u32 {
            let (a, b) = (16 + slot / 16, (slot % 16) * 16);
            let client = format!("172.{a}.{b}.0/28");
            let repl = format!("172.{a}.{}.16/28", b);
            let mut made = Vec::new();
            for (which, subnet) in [("client", &client), ("repl", &repl)] {
                let req = NetworkCreateRequest {
                    name: self.network(which),
                    driver: Some("bridge".into()),
                    labels: Some(labels(&self.run_id, self.origin)),
                    ipam: Some(Ipam {
                        config: Some(vec![IpamConfig { subnet: Some(subnet.clone()), ..Default::default() }]),
                        ..Default::default()
                    }),
                    ..Default::default()
                };
                match self.docker.create_network(req).await {
                    Ok(_) => made.push(which),
                    Err(e) if e.to_string().contains("overlap") => break,
                    Err(e) => return Err(docker_err("cannot create a network", e)),
                }
            }
            if made.len() == 2 {
                return Ok(());
            }
            for which in made {
                let _ = self.docker.remove_network(&self.network(which)).await;
            }
        }
        Err(docker_err(
            "no free subnet",
            "64 candidate /28 pairs in 172.16-19.x.x all overlap existing networks; run `leasequake clean`",
        ))
    }

    async fn create_containers(&mut self, cfg: &EnvConfig) -> Result<(), HarnessError> {
        let ids: Vec<String> = (1..=3).map(|i| sentinel_id(&self.run_id, i)).collect();
        let mut specs: Vec<Spec> = vec![
            Spec {
                role: "redis-primary",
                image: &cfg.redis_image,
                cmd: redis_container("", &["--replica-announce-ip", "redis-primary"]),
                nets: vec!["client", "repl"],
                publish: vec![],
                data_in_memory: false,
            },
            Spec {
                role: "redis-replica",
                image: &cfg.redis_image,
                // Through the replication network's own name for the primary: cutting that network
                // (the isolate failover) then really stops replication, which the client network,
                // shared by both, would otherwise carry on.
                // Started once the primary listens (at most 10 s of 50 ms polls): a replica that
                // finds no primary retries only on its once-a-second cron, which cost start-up ~1 s.
                cmd: redis_container(
                    "i=0; while [ $i -lt 200 ] && ! redis-cli -h redis-primary-repl ping >/dev/null 2>&1; \
                     do i=$((i+1)); sleep 0.05; done; ",
                    &["--replicaof", "redis-primary-repl", "6379", "--replica-announce-ip", "redis-replica"],
                ),
                nets: vec!["client", "repl"],
                publish: vec![],
                data_in_memory: false,
            },
        ];
        for (i, name) in [(1usize, "sentinel-1"), (2, "sentinel-2"), (3, "sentinel-3")] {
            let script = sentinel_script(name, i, &ids, cfg);
            specs.push(Spec {
                role: name,
                image: &cfg.redis_image,
                cmd: vec!["/bin/sh".into(), "-c".into(), script],
                nets: vec!["repl"],
                publish: vec![],
                data_in_memory: true,
            });
        }
        let mut proxy_ports = vec![PROXY_API_PORT];
        proxy_ports.extend((0..proxy_ports_for(cfg.nodes)).map(|i| PROXY_PORT_BASE + i as u16));
        specs.push(Spec {
            role: "proxy",
            image: &cfg.proxy_image,
            cmd: vec![],
            nets: vec!["client"],
            publish: proxy_ports,
            data_in_memory: false,
        });
        specs.push(Spec {
            role: "store",
            image: &cfg.store_image,
            cmd: crate::image::store_command(cfg.store_policy),
            nets: vec!["client"],
            publish: vec![STORE_PORT],
            data_in_memory: false,
        });

        // Started concurrently: pre-seeded Sentinel configs make the order irrelevant.
        let starts = specs.iter().map(|s| self.start(s));
        let results = futures_util::future::join_all(starts).await;
        for (spec, r) in specs.iter().zip(results) {
            self.containers.insert(spec.role, r?);
        }
        let ports = self.published("proxy").await?;
        self.proxy_api = format!("127.0.0.1:{}", ports[&PROXY_API_PORT]);
        self.proxy_ports = (0..proxy_ports_for(cfg.nodes)).map(|i| ports[&(PROXY_PORT_BASE + i as u16)]).collect();
        self.store_addr = format!("127.0.0.1:{}", self.published("store").await?[&STORE_PORT]);
        Ok(())
    }

    /// Creates and starts `spec`'s container; a port clash (another program took the port Docker
    /// picked, between its pick and the bind) removes it and tries again with a fresh port.
    async fn start(&self, spec: &Spec<'_>) -> Result<String, HarnessError> {
        let mut attempt = 1;
        loop {
            match self.start_once(spec).await {
                Err((id, e)) if attempt < PORT_TRIES && DockerTrouble::of(&e) == DockerTrouble::PortTaken => {
                    tracing::warn!(role = spec.role, attempt, error = %e, "a published port was taken: the container is created again");
                    if let Some(id) = id {
                        let opts = RemoveContainerOptionsBuilder::new().force(true).v(true).build();
                        let _ = self.docker.remove_container(&id, Some(opts)).await;
                    }
                    attempt += 1;
                }
                Err((_, e)) => return Err(docker_err(&format!("cannot start {}", spec.role), e)),
                Ok(id) => return Ok(id),
            }
        }
    }

    /// One try of [`Self::start`]: the container's id, or the error with the id of what was
    /// created before it.
    async fn start_once(&self, spec: &Spec<'_>) -> Result<String, (Option<String>, String)> {
        let (role, cmd, nets, publish) = (spec.role, &spec.cmd, &spec.nets, &spec.publish);
        let bindings: HashMap<String, Option<Vec<PortBinding>>> = publish
            .iter()
            .map(|p| {
                (
                    format!("{p}/tcp"),
                    Some(vec![PortBinding { host_ip: Some("127.0.0.1".into()), host_port: Some(String::new()) }]),
                )
            })
            .collect();
        let first = self.network(nets[0]);
        let endpoint = EndpointSettings { aliases: Some(net_aliases(role, nets[0])), ..Default::default() };
        let body = ContainerCreateBody {
            image: Some(spec.image.reference.clone()),
            cmd: (!cmd.is_empty()).then(|| cmd.to_vec()),
            // Redis and the Sentinels read their password from here (into their config files).
            env: role
                .starts_with("redis")
                .then(|| vec![format!("{PASSWORD_VAR}={}", self.password)])
                .or_else(|| role.starts_with("sentinel").then(|| vec![format!("{PASSWORD_VAR}={}", self.password)])),
            hostname: Some(role.to_owned()),
            labels: Some(labels(&self.run_id, self.origin)),
            exposed_ports: Some(publish.iter().map(|p| format!("{p}/tcp")).collect()),
            host_config: Some(HostConfig {
                port_bindings: Some(bindings),
                network_mode: Some(first.clone()),
                tmpfs: spec.data_in_memory.then(|| HashMap::from([(SENTINEL_DATA.to_owned(), String::new())])),
                ..Default::default()
            }),
            networking_config: Some(NetworkingConfig { endpoints_config: Some(HashMap::from([(first, endpoint)])) }),
            ..Default::default()
        };
        let name = format!("lq-{}-{role}", self.run_id);
        let options = CreateContainerOptionsBuilder::new().name(&name).build();
        let id = self
            .docker
            .create_container(Some(options), body)
            .await
            .map_err(|e| (None, format!("creating it: {e}")))?
            .id;
        for net in &nets[1..] {
            let req = NetworkConnectRequest {
                container: id.clone(),
                endpoint_config: Some(EndpointSettings { aliases: Some(net_aliases(role, net)), ..Default::default() }),
            };
            self.docker
                .connect_network(&self.network(net), req)
                .await
                .map_err(|e| (Some(id.clone()), format!("connecting it to {net}: {e}")))?;
        }
        match self.docker.start_container(&id, None).await {
            Ok(()) => Ok(id),
            Err(e) => Err((Some(id), e.to_string())),
        }
    }

    async fn published(&self, role: &str) -> Result<BTreeMap<u16, u16>, HarnessError> {
        let info =
            self.docker.inspect_container(&self.containers[role], None).await.map_err(|e| docker_err(role, e))?;
        let ports = info.network_settings.and_then(|n| n.ports).unwrap_or_default();
        Ok(ports
            .into_iter()
            .filter_map(|(k, v)| {
                let inner: u16 = k.split('/').next()?.parse().ok()?;
                let host: u16 = v?.first()?.host_port.as_ref()?.parse().ok()?;
                Some((inner, host))
            })
            .collect())
    }

    /// Runs `cmd` in the container of `role` and returns its output (stdout and stderr).
    pub async fn exec(&self, role: &str, cmd: &[&str]) -> Result<String, HarnessError> {
        self.exec_with(role, cmd, Vec::new()).await
    }

    async fn exec_with(&self, role: &str, cmd: &[&str], env: Vec<String>) -> Result<String, HarnessError> {
        let id = self.containers.get(role).ok_or_else(|| docker_err("exec", format!("no container {role}")))?;
        let run = async {
            let exec = self
                .docker
                .create_exec(
                    id,
                    CreateExecOptions {
                        cmd: Some(cmd.to_vec()),
                        env: (!env.is_empty()).then(|| env.iter().map(String::as_str).collect()),
                        attach_stdout: Some(true),
                        attach_stderr: Some(true),
                        ..Default::default()
                    },
                )
                .await?;
            let mut text = String::new();
            if let StartExecResults::Attached { mut output, .. } = self.docker.start_exec(&exec.id, None).await? {
                while let Some(chunk) = output.next().await {
                    match chunk? {
                        LogOutput::StdOut { message } | LogOutput::StdErr { message } => {
                            text.push_str(&String::from_utf8_lossy(&message))
                        }
                        _ => {}
                    }
                }
            }
            Ok::<_, testcontainers::bollard::errors::Error>(text)
        };
        match tokio::time::timeout(Duration::from_secs(5), run).await {
            Ok(Ok(t)) => Ok(t),
            Ok(Err(e)) => Err(docker_err(&format!("exec in {role}"), e)),
            Err(_) => Err(docker_err(&format!("exec in {role}"), "no answer within 5 s")),
        }
    }

    /// Runs `cmd` in the container of `role` for as long as it lasts or until `stop`, handing each
    /// line of its output to `line` as it comes; at most `max_lines` lines. Starting it waits 5 s
    /// at most; the output then runs as long as the command does, bounded by `stop`.
    pub async fn follow(
        &self,
        role: &str,
        cmd: &[&str],
        stop: &tokio_util::sync::CancellationToken,
        max_lines: usize,
        mut line: impl FnMut(&str),
    ) -> Result<(), HarnessError> {
        let id = self.containers.get(role).ok_or_else(|| docker_err("exec", format!("no container {role}")))?;
        let opts = CreateExecOptions {
            cmd: Some(cmd.to_vec()),
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            ..Default::default()
        };
        let start = async {
            let exec = self.docker.create_exec(id, opts).await?;
            self.docker.start_exec(&exec.id, None).await
        };
        let started = match tokio::time::timeout(Duration::from_secs(5), start).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => return Err(docker_err(&format!("exec in {role}"), e)),
            Err(_) => return Err(docker_err(&format!("exec in {role}"), "no answer within 5 s")),
        };
        let StartExecResults::Attached { mut output, .. } = started else { return Ok(()) };
        let (mut pending, mut seen) = (String::new(), 0usize);
        // Bounded by `stop`, by the command's end and by `max_lines`.
        while seen < max_lines {
            let chunk = tokio::select! {
                () = stop.cancelled() => break,
                c = output.next() => c,
            };
            let message = match chunk {
                None => break,
                Some(Err(e)) => return Err(docker_err(&format!("exec in {role}"), e)),
                Some(Ok(LogOutput::StdOut { message } | LogOutput::StdErr { message })) => message,
                Some(Ok(_)) => continue,
            };
            pending.push_str(&String::from_utf8_lossy(&message));
            while let Some(end) = pending.find('\n') {
                line(pending[..end].trim_end());
                pending.drain(..=end);
                seen += 1;
            }
            // A line longer than this is not a Sentinel's: keep the memory bounded.
            if pending.len() > 64 * 1024 {
                pending.clear();
            }
        }
        Ok(())
    }

    /// The role and container id of every container of the environment.
    pub fn containers(&self) -> impl Iterator<Item = (&'static str, &str)> {
        self.containers.iter().map(|(r, id)| (*r, id.as_str()))
    }

    /// `redis-cli` against the Redis instance (or Sentinel) of `role`, authenticated through
    /// `REDISCLI_AUTH` in the exec's environment: no password on a command line.
    pub async fn redis_cli(&self, role: &str, args: &[&str]) -> Result<String, HarnessError> {
        let mut cmd = vec!["redis-cli", "--no-auth-warning"];
        if role.starts_with("sentinel") {
            // Sentinels take no password.
            cmd.extend(["-p", "26379"]);
            cmd.extend(args);
            return self.exec(role, &cmd).await;
        }
        cmd.extend(args);
        self.exec_authenticated(role, &cmd).await
    }

    /// Several commands (one per line) through one `redis-cli` in one `docker exec`: the replies,
    /// one after another. One exec instead of one per command: execs are what loads dockerd.
    pub async fn redis_cli_batch(&self, role: &str, commands: &str) -> Result<String, HarnessError> {
        let script = format!("printf '%s' '{}' | redis-cli --no-auth-warning", commands.replace('\'', ""));
        self.exec_authenticated(role, &["sh", "-c", &script]).await
    }

    /// [`Self::exec`] with the Redis password in the exec's environment (`REDISCLI_AUTH`, which
    /// `redis-cli` reads), never on its command line.
    pub async fn exec_authenticated(&self, role: &str, cmd: &[&str]) -> Result<String, HarnessError> {
        self.exec_with(role, cmd, vec![format!("REDISCLI_AUTH={}", self.password)]).await
    }

    /// The host port of node `i`'s proxy on `link`.
    #[must_use]
    pub fn node_port(&self, i: u32, link: NodeLink) -> u16 {
        self.proxy_ports.get(link.slot(i)).copied().unwrap_or(0)
    }

    /// The Redis password of this run (for the nodes' URLs; never printed).
    #[must_use]
    pub fn redis_password(&self) -> &str {
        &self.password
    }

    /// The container id of `role`.
    #[must_use]
    pub fn container(&self, role: &str) -> Option<&str> {
        self.containers.get(role).map(String::as_str)
    }

    /// The docker client.
    #[must_use]
    pub fn docker(&self) -> &Docker {
        &self.docker
    }

    /// Sets every Sentinel's down-after and failover timeout to the configured values, each one
    /// once it has heard the primary and the replica answer a ping (see [`Self::until_in_touch`]).
    /// Each Sentinel on its own: they ping at their own phases, so all three are rarely in touch
    /// at one instant.
    async fn apply_sentinel_timings(&self, cfg: &EnvConfig) -> Result<(), HarnessError> {
        let within = (cfg.down_after_ms.saturating_mul(3) / 4).max(100);
        let (down, failover) = (cfg.down_after_ms.to_string(), cfg.failover_timeout_ms.to_string());
        let args = ["SENTINEL", "SET", MASTER_NAME, "down-after-milliseconds", &down, "failover-timeout", &failover];
        let set = |s: &'static str| async move {
            self.until_in_touch(s, within).await?;
            let answer = self.redis_cli(s, &args).await?;
            if answer.trim().eq_ignore_ascii_case("ok") {
                Ok(())
            } else {
                Err(HarnessError::Environment {
                    detail: format!("{s} refused the Sentinel timings: {}", answer.trim()),
                })
            }
        };
        futures_util::future::join_all(SENTINELS.map(set)).await.into_iter().collect()
    }

    /// Waits (at most 15 s) until Sentinel `s` has had an answer from the primary and from the
    /// replica since it started, the last within `within_ms`, with no ping outstanding. Until its
    /// first answer a Sentinel counts a link's silence from the link's creation, and it sends its
    /// first ping only a ping period (1 s) after it: measured, `last-ping-sent` and
    /// `last-ok-ping-reply` both grow from 0 at the Sentinel's start until ~1 s, then drop to 0
    /// and to the last answer's age. An environment is ready ~0.6 s after its Sentinels start; a
    /// 1 s down-after set then makes a Sentinel flag the instance down at its first ping (+sdown
    /// ~1 s after its start; the replica in 5 of 6 environments, once the primary in two
    /// Sentinels 57 ms apart). Two at once are a quorum: a healthy primary fails over, the
    /// drift 0.3 s into a CI run. An age below `within_ms` alone let that through; no outstanding
    /// ping (`last-ping-sent` 0) rules out the link not yet answered.
    async fn until_in_touch(&self, s: &str, within_ms: u64) -> Result<(), HarnessError> {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let (primary, replica) = tokio::join!(
                self.redis_cli(s, &["SENTINEL", "MASTER", MASTER_NAME]),
                self.redis_cli(s, &["SENTINEL", "REPLICAS", MASTER_NAME]),
            );
            let (primary, replica) = (primary.unwrap_or_default(), replica.unwrap_or_default());
            if heard(&primary, within_ms) && heard(&replica, within_ms) {
                return Ok(());
            }
            if Instant::now() > deadline {
                let ages = |out: &str| {
                    let ms = |k: &str| master_field(out, k).unwrap_or("?").to_owned();
                    format!(
                        "last answer {} ms ago, a ping outstanding for {} ms",
                        ms("last-ok-ping-reply"),
                        ms("last-ping-sent")
                    )
                };
                return Err(HarnessError::Environment {
                    detail: format!(
                        "{s} has not had an answer from the primary and the replica within {within_ms} ms with no ping \
                         outstanding for 15 s (primary: {}; replica: {}), so its timings cannot be shortened safely",
                        ages(&primary),
                        ages(&replica)
                    ),
                });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn wait_ready(&self, limit: Duration) -> Result<(), HarnessError> {
        // (`ATTACH_READY_LIMIT` for an environment attached to, the start-up limit for a new one.)
        let deadline = Instant::now() + limit;
        let mut last = String::from("not checked yet");
        // Bounded by `limit`.
        while Instant::now() < deadline {
            match self.not_ready().await {
                None => return Ok(()),
                Some(why) => last = why,
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Err(HarnessError::Environment {
            detail: format!(
                "it did not become ready within {limit:?}: {last}. Fix: check the machine's load (parallel runs \
                 and builds slow start-up; `leasequake env up` shows whether one environment starts here); \
                 `leasequake doctor` checks the rest"
            ),
        })
    }

    /// Why the environment is not ready, or `None` when it is.
    async fn not_ready(&self) -> Option<String> {
        // One docker exec per instance, all at once (each costs a process start in the container).
        let (replica, seen) = tokio::join!(
            self.redis_cli("redis-replica", &["INFO", "replication"]),
            futures_util::future::join_all(SENTINELS.map(|s| self.redis_cli(s, &["SENTINEL", "MASTER", MASTER_NAME]))),
        );
        let info = match replica {
            Ok(info) => info,
            Err(e) => return Some(format!("the replica cannot be asked (docker exec): {e}")),
        };
        if info.contains("role:master") {
            return Some(
                "Sentinel failed over during start-up (the replica is master): the machine stalled Redis for longer \
                 than the start-up down-after"
                    .into(),
            );
        }
        if !info.contains("master_link_status:up") {
            return Some("the replica is not linked to the primary".into());
        }
        for (s, out) in SENTINELS.into_iter().zip(seen) {
            let out = out.unwrap_or_default();
            let get = |k: &str| master_field(&out, k);
            if get("num-slaves") != Some("1")
                || get("num-other-sentinels") != Some("2")
                || get("flags") != Some("master")
            {
                return Some(format!("{s} does not yet see the primary, the replica and two other sentinels"));
            }
        }
        if ProxyClient::new(self.proxy_api.clone()).with_timeout(Duration::from_secs(1)).version().await.is_err() {
            return Some("the proxy API does not answer".into());
        }
        match leasequake_toxiproxy::http::exchange(&self.store_addr, "GET", "/v1/health", None).await {
            Ok((200, _)) => None,
            _ => Some("the store does not answer".into()),
        }
    }

    /// Attaches to an environment that is already running (`leasequake env up`, or
    /// docker-compose.yml with run id `compose`): finds its containers by the run label, reads the
    /// published ports, and checks that it is ready and has proxy ports for `nodes` nodes. The
    /// environment is left running when the run ends: `down` and Drop leave it alone.
    pub async fn attach(docker: Docker, run_id: &str, password: String, nodes: u32) -> Result<Self, HarnessError> {
        let problem = |detail: String| HarnessError::Environment { detail };
        let filters = HashMap::from([("label", vec![format!("{LABEL_RUN}={run_id}")])]);
        let listed = docker
            .list_containers(Some(ListContainersOptionsBuilder::new().all(false).filters(&filters).build()))
            .await
            .map_err(|e| docker_err("cannot list containers", e))?;
        let mut env = Self {
            docker,
            run_id: run_id.to_owned(),
            password,
            origin: "attached",
            containers: BTreeMap::new(),
            proxy_api: String::new(),
            store_addr: String::new(),
            proxy_ports: Vec::new(),
            ready_in: Duration::ZERO,
            removed: true,
        };
        for c in listed {
            let labels = c.labels.unwrap_or_default();
            let name = c.names.unwrap_or_default().first().map(|n| n.trim_start_matches('/').to_owned());
            // env up names containers lq-<run>-<role>; docker-compose labels them with the service.
            let role = labels
                .get("com.docker.compose.service")
                .cloned()
                .or_else(|| name.and_then(|n| n.strip_prefix(&format!("lq-{run_id}-")).map(str::to_owned)));
            if let (Some(role), Some(id)) = (role, c.id) {
                if let Some(known) = ROLES.iter().find(|r| **r == role) {
                    env.containers.insert(known, id);
                }
            }
        }
        if env.containers.is_empty() {
            return Err(problem(format!(
                "no running container carries {LABEL_RUN}={run_id}. Fix: start one with `leasequake env up` (it prints \
                 its run id) or `docker-compose up -d` (run id `compose`); `docker ps --filter label={LABEL_RUN}` lists them"
            )));
        }
        if let Some(missing) = ROLES.iter().find(|r| !env.containers.contains_key(*r)) {
            return Err(problem(format!(
                "environment {run_id} has no running `{missing}` container. Fix: restart it (`leasequake env up` again, or \
                 `docker-compose up -d`)"
            )));
        }
        let ports = env.published("proxy").await?;
        let api = ports
            .get(&PROXY_API_PORT)
            .ok_or_else(|| problem(format!("the proxy of {run_id} does not publish its API port {PROXY_API_PORT}")))?;
        env.proxy_api = format!("127.0.0.1:{api}");
        env.proxy_ports = ports.range(PROXY_PORT_BASE..).map(|(_, host)| *host).collect();
        if env.proxy_ports.len() < proxy_ports_for(nodes) {
            return Err(problem(format!(
                "environment {run_id} publishes {} proxy ports, a run of {nodes} nodes needs {}. Fix: `leasequake env up \
                 --nodes {nodes}`",
                env.proxy_ports.len(),
                proxy_ports_for(nodes)
            )));
        }
        env.proxy_ports.truncate(proxy_ports_for(nodes));
        let store = env.published("store").await?;
        env.store_addr = format!(
            "127.0.0.1:{}",
            store
                .get(&STORE_PORT)
                .ok_or_else(|| problem(format!("the store of {run_id} does not publish {STORE_PORT}")))?
        );
        let auth = env.redis_cli("redis-primary", &["PING"]).await?;
        if !auth.contains("PONG") {
            return Err(problem(format!(
                "the Redis password given for {run_id} is refused. Fix: pass the environment's password file \
                 (`env up` prints it) with --redis-password-file, or set LEASEQUAKE_REDIS_PASSWORD"
            )));
        }
        // A Sentinel's view can flap for a moment after start-up or a run (a replica briefly seen
        // down): readiness is waited for, bounded, not sampled once.
        if let Err(e) = env.wait_ready(ATTACH_READY_LIMIT).await {
            return Err(problem(format!("environment {run_id} is not ready: {e}")));
        }
        Ok(env)
    }

    /// The store policy the environment's store runs (`enforce` or `observe`), from its command.
    pub async fn store_policy(&self) -> Result<leasequake_reports::history::StorePolicy, HarnessError> {
        let info =
            self.docker.inspect_container(&self.containers["store"], None).await.map_err(|e| docker_err("store", e))?;
        let cmd = info.config.and_then(|c| c.cmd).unwrap_or_default().join(" ");
        Ok(if cmd.contains("observe") {
            leasequake_reports::history::StorePolicy::Observe
        } else if cmd.contains("flawed-skips-persist") {
            leasequake_reports::history::StorePolicy::FlawedSkipsPersist
        } else {
            leasequake_reports::history::StorePolicy::Enforce
        })
    }

    /// Writes every container's log (stdout and stderr) to `dir/<role>.log`; best effort, bounded
    /// to the last 20 000 lines each. Redis, Sentinel, proxy and store never log the password.
    pub async fn save_logs(&self, dir: &std::path::Path) {
        use testcontainers::bollard::query_parameters::LogsOptionsBuilder;
        let _ = std::fs::create_dir_all(dir);
        for (role, id) in &self.containers {
            let opts = LogsOptionsBuilder::new().stdout(true).stderr(true).tail("20000").build();
            let mut stream = self.docker.logs(id, Some(opts));
            let mut text = Vec::new();
            let read = async {
                while let Some(Ok(chunk)) = stream.next().await {
                    text.extend_from_slice(&chunk.into_bytes());
                }
            };
            let _ = tokio::time::timeout(Duration::from_secs(5), read).await;
            let _ = std::fs::write(dir.join(format!("{role}.log")), &text);
        }
    }

    /// Whether this environment was attached to (and outlives the run).
    #[must_use]
    pub fn attached(&self) -> bool {
        self.origin == "attached"
    }

    /// Removes the run's containers and networks (nothing, for an attached environment).
    pub async fn down(mut self) -> Result<(), HarnessError> {
        if self.attached() {
            return Ok(());
        }
        self.removed = true;
        remove_labelled(&self.docker, Some(&self.run_id), false).await
    }
}

impl Drop for Environment {
    fn drop(&mut self) {
        if self.removed {
            return;
        }
        // Backstop (panic, early error): the docker CLI, synchronously; no async I/O in Drop.
        let filter = format!("label={LABEL_RUN}={}", self.run_id);
        if let Ok(out) = std::process::Command::new("docker").args(["ps", "-aq", "--filter", &filter]).output() {
            let ids: Vec<String> = String::from_utf8_lossy(&out.stdout).split_whitespace().map(str::to_owned).collect();
            if !ids.is_empty() {
                let _ = std::process::Command::new("docker").arg("rm").arg("-f").args(&ids).output();
            }
        }
        if let Ok(out) =
            std::process::Command::new("docker").args(["network", "ls", "-q", "--filter", &filter]).output()
        {
            for id in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                let _ = std::process::Command::new("docker").args(["network", "rm", id]).output();
            }
        }
    }
}

/// Whether a removal failed only because the object is already gone or being removed.
fn gone_or_going(e: &testcontainers::bollard::errors::Error) -> bool {
    use testcontainers::bollard::errors::Error;
    match e {
        Error::DockerResponseServerError { status_code: 404, .. } => true,
        Error::DockerResponseServerError { status_code: 409, message } => message.contains("in progress"),
        _ => false,
    }
}

/// A fixed 40-hex Sentinel id for sentinel `i` of `run_id`.
fn sentinel_id(run_id: &str, i: usize) -> String {
    let h = Sha256::digest(format!("{run_id}/sentinel-{i}"));
    h.iter().take(20).map(|b| format!("{b:02x}")).collect()
}

/// Removes labelled containers and networks: of one run, or (with `None`) of every run; with
/// `only_dead`, only those whose creating process is gone (so live runs and tests are untouched).
/// Returns nothing on success; errors name the object that could not be removed.
pub async fn remove_labelled(docker: &Docker, run: Option<&str>, only_dead: bool) -> Result<(), HarnessError> {
    let filter = match run {
        Some(r) => format!("{LABEL_RUN}={r}"),
        None => format!("{LABEL_MANAGED}=true"),
    };
    remove_matching(docker, &filter, only_dead).await
}

/// A container's names on network `net`: its role, and on the replication network also
/// `<role>-repl`, a name that exists only there.
#[must_use]
pub fn net_aliases(role: &str, net: &str) -> Vec<String> {
    if net == "repl" {
        vec![role.to_owned(), format!("{role}-repl")]
    } else {
        vec![role.to_owned()]
    }
}

/// How many labelled containers exist (of any run, running or not).
pub async fn labelled_containers(docker: &Docker) -> Result<usize, HarnessError> {
    let filters = HashMap::from([("label", vec![format!("{LABEL_MANAGED}=true")])]);
    let containers = docker
        .list_containers(Some(ListContainersOptionsBuilder::new().all(true).filters(&filters).build()))
        .await
        .map_err(|e| docker_err("cannot list containers", e))?;
    Ok(containers.len())
}

/// Removes every labelled container and network created by `origin` (e.g. `env-up`).
pub async fn remove_origin(docker: &Docker, origin: &str) -> Result<(), HarnessError> {
    remove_matching(docker, &format!("{LABEL_ORIGIN}={origin}"), false).await
}

async fn remove_matching(docker: &Docker, filter: &str, only_dead: bool) -> Result<(), HarnessError> {
    let filter = filter.to_owned();
    let filters = HashMap::from([("label", vec![filter])]);
    let containers = docker
        .list_containers(Some(ListContainersOptionsBuilder::new().all(true).filters(&filters).build()))
        .await
        .map_err(|e| docker_err("cannot list containers", e))?;
    let dead = |labels: &HashMap<String, String>| -> bool {
        let pid: Option<u32> = labels.get(LABEL_PID).and_then(|p| p.parse().ok());
        let start: Option<u64> = labels.get(LABEL_PID_START).and_then(|s| s.parse().ok());
        match pid {
            // No pid (docker-compose, by hand): not ours to judge; only `clean` removes it.
            None => false,
            Some(pid) => crate::procfs::start_ticks(pid) != start || start.is_none(),
        }
    };
    for c in containers {
        let labels = c.labels.unwrap_or_default();
        if only_dead && !dead(&labels) {
            continue;
        }
        if let Some(id) = c.id {
            let opts = RemoveContainerOptionsBuilder::new().force(true).v(true).build();
            match docker.remove_container(&id, Some(opts)).await {
                // Gone already, or another run is removing it (parallel start-ups clean alike).
                Err(e) if gone_or_going(&e) => {}
                Err(e) => return Err(docker_err(&format!("cannot remove container {id}"), e)),
                Ok(()) => {}
            }
        }
    }
    let networks = docker
        .list_networks(Some(ListNetworksOptionsBuilder::new().filters(&filters).build()))
        .await
        .map_err(|e| docker_err("cannot list networks", e))?;
    for n in networks {
        let labels = n.labels.unwrap_or_default();
        if only_dead && !dead(&labels) {
            continue;
        }
        if let Some(id) = n.id {
            // Bounded: a network still has endpoints while its containers are being removed.
            for attempt in 0..50 {
                match docker.remove_network(&id).await {
                    Ok(()) => break,
                    Err(e) if gone_or_going(&e) => break,
                    Err(e) if e.to_string().contains("active endpoints") && attempt < 49 => {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    Err(e) => return Err(docker_err(&format!("cannot remove network {id}"), e)),
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_docker_error_says_what_happened_and_the_fix_that_fits_it() {
        use super::{docker_err, DockerTrouble};
        use crate::error::HarnessError;
        // As Docker 20.10 words them (a port clash seen in a run; the daemon's socket gone).
        let clash = "Docker responded with status code 500: driver failed programming external connectivity on \
                     endpoint lq-1a2b3c4d-proxy: Error starting userland proxy: listen tcp4 127.0.0.1:41235: bind: \
                     address already in use";
        let allocated =
            "Docker responded with status code 500: Bind for 127.0.0.1:41235 failed: port is already allocated";
        let gone = "error trying to connect: No such file or directory (os error 2)";
        let refused = "Docker responded with status code 404: No such image: leasequake/redis:abc";
        assert_eq!(DockerTrouble::of(clash), DockerTrouble::PortTaken);
        assert_eq!(DockerTrouble::of(allocated), DockerTrouble::PortTaken);
        assert_eq!(DockerTrouble::of(gone), DockerTrouble::Gone);
        assert_eq!(DockerTrouble::of(refused), DockerTrouble::Refused);
        let said = |e: &str| docker_err("cannot start proxy", e).to_string();
        // A port clash is not "start Docker": the daemon is running.
        assert!(!said(clash).contains("systemctl start docker") && said(clash).contains("ss -ltnp"), "{}", said(clash));
        assert!(said(gone).contains("systemctl start docker"), "{}", said(gone));
        assert!(
            !said(refused).contains("systemctl start docker") && said(refused).contains("refused"),
            "{}",
            said(refused)
        );
        assert!(matches!(docker_err("x", gone), HarnessError::DockerUnavailable { .. }));
    }

    #[test]
    fn a_sentinel_master_field_is_the_line_after_its_name() {
        let answer = "name\nleasequake\nflags\nmaster\nlast-ok-ping-reply\n412\nnum-slaves\n1\n";
        assert_eq!(super::master_field(answer, "last-ok-ping-reply"), Some("412"));
        assert_eq!(super::master_field(answer, "flags"), Some("master"));
        assert_eq!(super::master_field(answer, "last-ping-sent"), None);
        assert_eq!(super::master_field("num-slaves", "num-slaves"), None, "a name without a value");
    }

    #[test]
    fn a_sentinel_has_heard_an_instance_only_after_an_answer_with_none_outstanding() {
        // What a Sentinel printed 0.6 s after its start, before any answer (both ages count from
        // the link's creation), then after its first answer, then with a ping outstanding.
        let view = |sent: u64, ok: u64| format!("name\nleasequake\nlast-ping-sent\n{sent}\nlast-ok-ping-reply\n{ok}\n");
        assert!(!super::heard(&view(584, 584), 750), "young enough, but nothing answered yet");
        assert!(super::heard(&view(0, 96), 750));
        assert!(!super::heard(&view(0, 800), 750), "the last answer is too old");
        assert!(!super::heard(&view(40, 40), 750), "a ping outstanding");
        assert!(!super::heard("name\nleasequake\n", 750), "no fields: a Sentinel that could not be asked");
    }
}
