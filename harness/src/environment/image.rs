//! Images built by the project itself, with no registry: a `FROM scratch` root filesystem holding a
//! program, every library `ldd` lists and the loader, imported with `docker import` semantics
//! through the Docker API. Each image is tagged by the hash of its inputs (rebuilt only when they
//! change) and also carries the stable tag `current`, which docker-compose.yml uses. Every image
//! carries the project's labels.
//!
//! This module packs files; it does not compile them (`cargo build` does) and it runs nothing.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use sha2::{Digest, Sha256};
use testcontainers::bollard::query_parameters::{
    CreateImageOptionsBuilder, ListImagesOptionsBuilder, RemoveImageOptions, TagImageOptionsBuilder,
};
use testcontainers::bollard::{body_full, Docker};

use crate::docker::{LABEL_IMAGE, LABEL_INPUTS, LABEL_MANAGED};
use crate::error::HarnessError;
use leasequake_reports::history::StorePolicy;

/// The stable tag every image of ours also carries.
pub const STABLE_TAG: &str = "current";
/// The fault proxy's API port inside its container.
pub const PROXY_API_PORT: u16 = 8474;
/// The vector store's port inside its container.
pub const STORE_PORT: u16 = 7700;

/// One file of an image's root filesystem.
#[derive(Debug, Clone)]
struct RootfsFile {
    source: PathBuf,
    dest: String,
    mode: u32,
}

/// What an image is made of.
#[derive(Debug, Clone)]
pub struct ImageSpec {
    name: &'static str,
    files: Vec<RootfsFile>,
    /// Symbolic links: (path, target).
    links: Vec<(String, String)>,
    /// Directories that must exist (empty), with their modes.
    dirs: Vec<(String, u32)>,
    cmd: Vec<String>,
    expose: Vec<u16>,
    /// Environment variables (`K=V`) baked into the image.
    env: Vec<String>,
}

/// The Redis image's Debian packages: the server/sentinel/cli binaries, their two libraries not
/// found on a plain Debian host, and a static busybox for `sh` (health checks, `docker exec`).
const REDIS_PACKAGES: [&str; 4] = ["redis-tools", "libjemalloc2", "liblzf1", "busybox-static"];

/// An image that exists locally.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Built {
    /// `repo:content-hash`, what the harness runs.
    pub reference: String,
    /// `repo:current`, what docker-compose.yml runs.
    pub stable: String,
    /// Whether it was built now (false: its inputs were unchanged and it was reused).
    pub rebuilt: bool,
    /// Time spent, build or check.
    pub took: Duration,
}

impl ImageSpec {
    /// The fault proxy: `toxiproxy-server` listening on 0.0.0.0:8474.
    pub fn proxy() -> Result<Self, HarnessError> {
        let binary = locate_binary("toxiproxy-server", "LEASEQUAKE_TOXIPROXY_BIN")?;
        let mut files =
            vec![RootfsFile { source: binary.clone(), dest: "/usr/local/bin/toxiproxy-server".into(), mode: 0o755 }];
        files.extend(shared_libraries(&binary, None)?);
        let cmd = ["/usr/local/bin/toxiproxy-server", "-host", "0.0.0.0", "-port", "8474"].map(str::to_owned).to_vec();
        Ok(Self {
            name: "toxiproxy",
            files,
            links: vec![],
            dirs: vec![],
            cmd,
            expose: vec![PROXY_API_PORT],
            env: vec![],
        })
    }

    /// The vector store: this harness's own binary running `vector-store` on 0.0.0.0:7700, its
    /// audit log in /data.
    pub fn store() -> Result<Self, HarnessError> {
        let binary = locate_binary("leasequake", "LEASEQUAKE_BIN")?;
        let mut files =
            vec![RootfsFile { source: binary.clone(), dest: "/usr/local/bin/leasequake".into(), mode: 0o755 }];
        files.extend(shared_libraries(&binary, None)?);
        Ok(Self {
            name: "vector-store",
            files,
            links: vec![],
            dirs: vec![("/data".into(), 0o777)],
            cmd: store_command(StorePolicy::Enforce),
            expose: vec![STORE_PORT],
            env: vec![],
        })
    }

    /// Redis (server, sentinel, cli) from Debian's packages, with busybox for a shell. Downloads
    /// the packages with `apt-get download` into the cache the first time.
    pub fn redis() -> Result<Self, HarnessError> {
        let root = debian_root(&REDIS_PACKAGES)?;
        let mut files = Vec::new();
        for path in ["/usr/bin/redis-check-rdb", "/usr/bin/redis-cli", "/bin/busybox"] {
            let source = root.join(path.trim_start_matches('/'));
            files.push(RootfsFile { source: source.clone(), dest: path.into(), mode: 0o755 });
            if path != "/bin/busybox" {
                for lib in shared_libraries(&source, Some(&root))? {
                    if !files.iter().any(|f| f.dest == lib.dest) {
                        files.push(lib);
                    }
                }
            }
        }
        files.push(RootfsFile { source: clock_shim()?, dest: CLOCK_SHIM_PATH.into(), mode: 0o644 });
        let links = [
            ("/usr/bin/redis-server", "redis-check-rdb"),
            ("/usr/bin/redis-sentinel", "redis-check-rdb"),
            ("/bin/sh", "busybox"),
        ];
        Ok(Self {
            name: "redis",
            files,
            links: links.map(|(a, b)| (a.to_owned(), b.to_owned())).to_vec(),
            dirs: vec![("/data".into(), 0o777), ("/tmp".into(), 0o1777)],
            cmd: ["/usr/bin/redis-server", "--protected-mode", "no", "--dir", "/data"].map(str::to_owned).to_vec(),
            expose: vec![6379, 26379],
            // Every dynamic program of the image reads its wall clock through the shim: 0 offset
            // until a `clock_jump` fault writes /data/clock-offset-ms.
            env: vec![format!("LD_PRELOAD={CLOCK_SHIM_PATH}")],
        })
    }

    /// The image repository, `leasequake/<name>`.
    #[must_use]
    pub fn repo(&self) -> String {
        format!("leasequake/{}", self.name)
    }

    /// The hash of everything that goes into the image: paths, modes, bytes, command, ports.
    fn inputs_hash(&self) -> Result<String, HarnessError> {
        let mut h = Sha256::new();
        for f in &self.files {
            let bytes = std::fs::read(&f.source)
                .map_err(|e| self.failed(format!("cannot read {}: {e}", f.source.display())))?;
            h.update(f.dest.as_bytes());
            h.update(f.mode.to_le_bytes());
            h.update((bytes.len() as u64).to_le_bytes());
            h.update(&bytes);
        }
        for (path, target) in &self.links {
            h.update(format!("link {path} {target}\0").as_bytes());
        }
        for (path, mode) in &self.dirs {
            h.update(format!("dir {path} {mode}\0").as_bytes());
        }
        h.update(self.cmd.join("\0").as_bytes());
        h.update(format!("{:?}", self.expose).as_bytes());
        h.update(self.env.join("\0").as_bytes());
        Ok(h.finalize().iter().take(6).map(|b| format!("{b:02x}")).collect())
    }

    /// The root filesystem as a tar archive; deterministic (fixed mtimes, sorted directories).
    fn rootfs_tar(&self) -> Result<Vec<u8>, HarnessError> {
        let mut tar = tar::Builder::new(Vec::new());
        let mut dirs = BTreeSet::new();
        let paths = self.files.iter().map(|f| f.dest.as_str()).chain(self.links.iter().map(|l| l.0.as_str()));
        for dest in paths {
            let mut p = Path::new(dest).parent();
            while let Some(d) = p.filter(|d| *d != Path::new("/")) {
                dirs.insert(d.to_path_buf());
                p = d.parent();
            }
        }
        let fail = |e: std::io::Error| self.failed(format!("cannot write the root filesystem archive: {e}"));
        for d in &dirs {
            let mut header = tar::Header::new_gnu();
            header.set_entry_type(tar::EntryType::Directory);
            header.set_mode(0o755);
            header.set_size(0);
            header.set_mtime(0);
            tar.append_data(&mut header, d.strip_prefix("/").unwrap_or(d), std::io::empty()).map_err(fail)?;
        }
        for (d, mode) in &self.dirs {
            let mut header = tar::Header::new_gnu();
            header.set_entry_type(tar::EntryType::Directory);
            header.set_mode(*mode);
            header.set_size(0);
            header.set_mtime(0);
            tar.append_data(&mut header, d.trim_start_matches('/'), std::io::empty()).map_err(fail)?;
        }
        for (path, target) in &self.links {
            let mut header = tar::Header::new_gnu();
            header.set_entry_type(tar::EntryType::Symlink);
            header.set_mode(0o777);
            header.set_size(0);
            header.set_mtime(0);
            tar.append_link(&mut header, path.trim_start_matches('/'), target).map_err(fail)?;
        }
        for f in &self.files {
            let bytes = std::fs::read(&f.source)
                .map_err(|e| self.failed(format!("cannot read {}: {e}", f.source.display())))?;
            let mut header = tar::Header::new_gnu();
            header.set_mode(f.mode);
            header.set_size(bytes.len() as u64);
            header.set_mtime(0);
            tar.append_data(&mut header, f.dest.trim_start_matches('/'), bytes.as_slice()).map_err(fail)?;
        }
        tar.into_inner().map_err(fail)
    }

    fn failed(&self, detail: String) -> HarnessError {
        HarnessError::ImageBuild { image: self.repo(), detail }
    }
}

/// Makes sure the image exists: reuses it when its inputs are unchanged, builds it otherwise.
pub async fn ensure(docker: &Docker, spec: &ImageSpec) -> Result<Built, HarnessError> {
    let started = Instant::now();
    let repo = spec.repo();
    let hash = spec.inputs_hash()?;
    let reference = format!("{repo}:{hash}");
    let exists = docker.inspect_image(&reference).await.is_ok();
    if !exists {
        let mut changes = vec![
            format!("CMD {}", serde_json::to_string(&spec.cmd).unwrap_or_default()),
            format!("LABEL {LABEL_MANAGED}=true"),
            format!("LABEL {LABEL_IMAGE}={}", spec.name),
            format!("LABEL {LABEL_INPUTS}={hash}"),
        ];
        changes.extend(spec.expose.iter().map(|p| format!("EXPOSE {p}/tcp")));
        changes.extend(spec.env.iter().map(|e| format!("ENV {e}")));
        let options = CreateImageOptionsBuilder::new().from_src("-").repo(&repo).tag(&hash).changes(changes).build();
        let tar = spec.rootfs_tar()?;
        let mut progress = docker.create_image(Some(options), Some(body_full(tar.into())), None);
        while let Some(step) = progress.next().await {
            step.map_err(|e| spec.failed(e.to_string()))?;
        }
        docker
            .inspect_image(&reference)
            .await
            .map_err(|e| spec.failed(format!("imported, but not found afterwards: {e}")))?;
    }
    let tag = TagImageOptionsBuilder::new().repo(&repo).tag(STABLE_TAG).build();
    docker.tag_image(&reference, Some(tag)).await.map_err(|e| spec.failed(format!("cannot tag {STABLE_TAG}: {e}")))?;
    if !exists {
        prune_older(docker, spec.name, &reference).await;
    }
    Ok(Built { reference, stable: format!("{repo}:{STABLE_TAG}"), rebuilt: !exists, took: started.elapsed() })
}

/// Older builds younger than this are kept: another checkout or version of leasequake on the same
/// Docker daemon (a second branch, a CI job beside it) may be about to start a container from one.
/// Seen: a build pruned a soak's store image between its check and its container's creation.
const PRUNE_AFTER_S: i64 = 24 * 3600;

/// Whether a build created at `created` (Unix seconds) is old enough to prune at `now`.
fn prunable(created: i64, now: i64) -> bool {
    now.saturating_sub(created) > PRUNE_AFTER_S
}

/// Removes this image's builds older than a day (best effort: an image a container still uses is
/// kept).
async fn prune_older(docker: &Docker, name: &str, keep: &str) {
    let filters = std::collections::HashMap::from([("label", vec![format!("{LABEL_IMAGE}={name}")])]);
    let options = ListImagesOptionsBuilder::new().filters(&filters).build();
    let Ok(images) = docker.list_images(Some(options)).await else { return };
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let now = i64::try_from(now).unwrap_or(i64::MAX);
    for image in images.iter().filter(|i| !i.repo_tags.iter().any(|t| t == keep) && prunable(i.created, now)) {
        for tag in &image.repo_tags {
            let _ = docker.remove_image(tag, None::<RemoveImageOptions>, None).await;
        }
    }
}

/// The image to run for `what`: the one named in the environment variable `env` if set (an
/// official image, say, where a registry is reachable), else ours, built or reused from `spec`.
/// A named image that is not present locally is an error that says what to pull.
pub async fn resolve(
    docker: &Docker,
    env: &str,
    spec: impl FnOnce() -> Result<ImageSpec, HarnessError>,
) -> Result<Built, HarnessError> {
    match std::env::var(env) {
        Ok(name) if !name.is_empty() => {
            let started = Instant::now();
            docker.inspect_image(&name).await.map_err(|_| HarnessError::ImageBuild {
                image: name.clone(),
                detail: format!("{env}={name} is not present locally: `docker pull {name}` where a registry is reachable, or unset {env} to build ours"),
            })?;
            Ok(Built { reference: name.clone(), stable: name, rebuilt: false, took: started.elapsed() })
        }
        _ => ensure(docker, &spec()?).await,
    }
}

/// The store container's command, with the run's fencing policy.
#[must_use]
pub fn store_command(policy: StorePolicy) -> Vec<String> {
    let policy = match policy {
        StorePolicy::Enforce => "enforce",
        StorePolicy::Observe => "observe",
        StorePolicy::FlawedSkipsPersist => "flawed-skips-persist",
    };
    let listen = format!("0.0.0.0:{STORE_PORT}");
    [
        "/usr/local/bin/leasequake",
        "vector-store",
        "--listen",
        &listen,
        "--audit-file",
        "/data/audit.jsonl",
        "--policy",
        policy,
    ]
    .map(str::to_owned)
    .to_vec()
}

/// Removes every image of ours (labelled); returns how many tags were removed.
pub async fn remove_all(docker: &Docker) -> Result<usize, HarnessError> {
    let filters = std::collections::HashMap::from([("label", vec![format!("{LABEL_MANAGED}=true")])]);
    let options = ListImagesOptionsBuilder::new().filters(&filters).build();
    let images = docker
        .list_images(Some(options))
        .await
        .map_err(|e| HarnessError::DockerUnavailable { detail: format!("cannot list images: {e}") })?;
    let mut removed = 0;
    for image in images {
        for tag in &image.repo_tags {
            docker.remove_image(tag, None::<RemoveImageOptions>, None).await.map_err(|e| HarnessError::ImageBuild {
                image: tag.clone(),
                detail: format!("cannot remove: {e} (is a container still using it? `leasequake clean` first)"),
            })?;
            removed += 1;
        }
    }
    Ok(removed)
}

/// Finds a program built from this workspace: `$env`, else next to the running executable (or
/// one level up, for test binaries in `target/*/deps`).
fn locate_binary(name: &str, env: &str) -> Result<PathBuf, HarnessError> {
    if let Some(p) = std::env::var_os(env).map(PathBuf::from) {
        return if p.is_file() {
            Ok(p)
        } else {
            Err(HarnessError::MissingBinary { name: name.into(), looked: vec![p], env: env.into() })
        };
    }
    let exe = std::env::current_exe().ok();
    let dirs: Vec<PathBuf> = exe
        .as_deref()
        .and_then(Path::parent)
        .map(|d| [Some(d.to_path_buf()), d.parent().map(Path::to_path_buf)].into_iter().flatten().collect())
        .unwrap_or_default();
    let looked: Vec<PathBuf> = dirs.iter().map(|d| d.join(name)).collect();
    looked.iter().find(|p| p.is_file()).cloned().ok_or_else(|| HarnessError::MissingBinary {
        name: name.into(),
        looked,
        env: env.into(),
    })
}

/// The shared libraries and loader `ldd` lists for `binary`, at the paths the loader expects.
/// Libraries found under `root` (unpacked packages) are taken from there, at their path inside it.
fn shared_libraries(binary: &Path, root: Option<&Path>) -> Result<Vec<RootfsFile>, HarnessError> {
    let failed = |detail: String| HarnessError::ImageBuild { image: binary.display().to_string(), detail };
    let mut ldd = Command::new("ldd");
    ldd.arg(binary);
    if let Some(root) = root {
        let dirs = ["usr/lib/x86_64-linux-gnu", "lib/x86_64-linux-gnu", "usr/lib", "lib"]
            .map(|d| root.join(d).display().to_string());
        ldd.env("LD_LIBRARY_PATH", dirs.join(":"));
    }
    let out = ldd.output().map_err(|e| failed(format!("cannot run `ldd` (install libc-bin): {e}")))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let missing: Vec<&str> = text.lines().filter(|l| l.contains("not found")).map(str::trim).collect();
    if !missing.is_empty() {
        return Err(failed(format!(
            "libraries not found on this host: {} (install the Debian packages that ship them)",
            missing.join(", ")
        )));
    }
    Ok(parse_ldd(&text)
        .into_iter()
        .map(|path| {
            let dest = root
                .and_then(|r| Path::new(&path).strip_prefix(r).ok())
                .map_or_else(|| path.clone(), |inner| format!("/{}", inner.display()));
            RootfsFile { source: PathBuf::from(&path), dest, mode: 0o755 }
        })
        .collect())
}

/// Where downloaded packages and unpacked roots are kept between runs.
/// Where the Redis image carries its clock shim (harness/clockshim), preloaded in every process.
pub const CLOCK_SHIM_PATH: &str = "/usr/lib/leasequake-clockshim.so";
/// The file whose leading decimal number is the shim's offset in ms, in every Redis container.
pub const CLOCK_OFFSET_FILE: &str = "/data/clock-offset-ms";

/// The clock shim the build compiled, written once into the cache so an image can take it in.
pub(crate) fn clock_shim() -> Result<PathBuf, HarnessError> {
    const SHIM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/clockshim.so"));
    let digest: String = Sha256::digest(SHIM).iter().take(6).map(|b| format!("{b:02x}")).collect();
    let path = cache_dir().join(format!("clockshim-{digest}.so"));
    if !path.is_file() {
        let failed = |e: std::io::Error| HarnessError::ImageBuild {
            image: "leasequake/redis".into(),
            detail: format!("cannot write the clock shim to {}: {e}", path.display()),
        };
        std::fs::create_dir_all(cache_dir()).map_err(failed)?;
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        std::fs::write(&tmp, SHIM).map_err(failed)?;
        std::fs::rename(&tmp, &path).map_err(failed)?;
    }
    Ok(path)
}

fn cache_dir() -> PathBuf {
    std::env::var_os("LEASEQUAKE_CACHE").map(PathBuf::from).unwrap_or_else(|| {
        std::env::var_os("HOME").map_or_else(std::env::temp_dir, PathBuf::from).join(".cache/leasequake")
    })
}

/// Downloads `packages` (once, with `apt-get download`; `apt-get update` first if apt knows none
/// of them) and unpacks them into a fresh root directory, which it returns.
fn debian_root(packages: &[&str]) -> Result<PathBuf, HarnessError> {
    let failed = |detail: String| HarnessError::ImageBuild { image: "leasequake/redis".into(), detail };
    let debs = cache_dir().join("debs");
    std::fs::create_dir_all(&debs).map_err(|e| failed(format!("cannot create {}: {e}", debs.display())))?;
    let have = |pkg: &str| -> Option<PathBuf> {
        let entries = std::fs::read_dir(&debs).ok()?;
        entries.flatten().map(|e| e.path()).find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&format!("{pkg}_")) && n.ends_with(".deb"))
        })
    };
    let missing: Vec<&str> = packages.iter().copied().filter(|p| have(p).is_none()).collect();
    if !missing.is_empty() {
        let download = || Command::new("apt-get").arg("download").args(&missing).current_dir(&debs).output();
        let mut out = download().map_err(|e| {
            failed(format!("cannot run `apt-get download` ({e}); on hosts without apt, use the official redis image"))
        })?;
        if !out.status.success() {
            // A fresh machine may have no package lists yet.
            let _ = Command::new("apt-get").args(["update", "-qq"]).output();
            out = download().map_err(|e| failed(e.to_string()))?;
        }
        if !out.status.success() {
            return Err(failed(format!(
                "`apt-get download {}` failed: {}",
                missing.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
    }
    // One root per set of package files, unpacked privately and renamed into place: parallel
    // builds never see a half-unpacked root, and a root in use is never deleted.
    let mut debs_used = Vec::new();
    for pkg in packages {
        debs_used.push(have(pkg).ok_or_else(|| failed(format!("{pkg} was not downloaded")))?);
    }
    let key: String = Sha256::digest(format!("{debs_used:?}")).iter().take(6).map(|b| format!("{b:02x}")).collect();
    let root = cache_dir().join(format!("root-{key}"));
    if root.is_dir() {
        return Ok(root);
    }
    let tmp = cache_dir().join(format!("unpacking-{key}-{}-{:x}", std::process::id(), rand::random::<u32>()));
    std::fs::create_dir_all(&tmp).map_err(|e| failed(format!("cannot create {}: {e}", tmp.display())))?;
    for deb in &debs_used {
        let out = Command::new("dpkg-deb")
            .arg("-x")
            .arg(deb)
            .arg(&tmp)
            .output()
            .map_err(|e| failed(format!("cannot run dpkg-deb: {e}")))?;
        if !out.status.success() {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(failed(format!(
                "dpkg-deb -x {} failed: {}",
                deb.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
    }
    if std::fs::rename(&tmp, &root).is_err() {
        // Another build put the same root in place first: use theirs.
        let _ = std::fs::remove_dir_all(&tmp);
    }
    Ok(root)
}

/// The absolute paths in `ldd` output (`lib => /path (addr)` and `/loader (addr)` lines).
fn parse_ldd(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|line| {
            let line = line.trim();
            let path = match line.split_once("=>") {
                Some((_, right)) => right.trim(),
                None => line,
            };
            let path = path.split_whitespace().next()?;
            path.starts_with('/').then(|| path.to_owned())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{locate_binary, parse_ldd};
    use crate::error::HarnessError;

    #[test]
    fn only_builds_older_than_a_day_are_pruned_so_a_concurrent_version_keeps_its_image() {
        let now = 1_800_000_000;
        assert!(!super::prunable(now - 120, now), "built two minutes ago by another checkout");
        assert!(!super::prunable(now - super::PRUNE_AFTER_S, now));
        assert!(super::prunable(now - super::PRUNE_AFTER_S - 1, now));
        assert!(!super::prunable(i64::MIN, i64::MIN), "no overflow");
    }

    #[test]
    fn a_missing_program_names_where_we_looked_and_the_fix() {
        let err = locate_binary("no-such-program", "LEASEQUAKE_NO_SUCH_PROGRAM_BIN").unwrap_err();
        let HarnessError::MissingBinary { looked, .. } = &err else { panic!("{err:?}") };
        assert!(!looked.is_empty());
        let msg = err.to_string();
        assert!(
            msg.contains("no-such-program")
                && msg.contains("cargo build --bins")
                && msg.contains("LEASEQUAKE_NO_SUCH_PROGRAM_BIN"),
            "{msg}"
        );
    }

    #[test]
    fn ldd_output_yields_libraries_and_loader_but_not_the_vdso() {
        let text = "\tlinux-vdso.so.1 (0x00007ffd)\n\tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x1)\n\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x2)\n\t/lib64/ld-linux-x86-64.so.2 (0x3)\n";
        assert_eq!(
            parse_ldd(text),
            ["/lib/x86_64-linux-gnu/libgcc_s.so.1", "/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"]
        );
        assert!(parse_ldd("\tnot a dynamic executable\n").is_empty());
    }
}
