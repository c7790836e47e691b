//! Proxies and their collection: create, start (bind), stop (close the listener and every open
//! connection, and wait until the port is free), update, toxics. The API serializes changes through
//! one async mutex; open connections never take it (they watch their proxy's toxics).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::{watch, OwnedSemaphorePermit};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{info, warn};

use crate::descriptors::Descriptors;
use crate::error::ApiError;
use crate::link;
use crate::toxic::Toxic;
use crate::witness::{Log, SharedScripts};

/// How long stopping a proxy waits for its connections to close.
const STOP_GRACE: Duration = Duration::from_secs(2);
/// A populate's step: the proxy's name and, when it existed before, its listen, upstream and
/// whether it ran.
type Step = (String, Option<(String, String, bool)>);

/// The most proxies one server holds: a populate of more is refused whole.
pub const MAX_PROXIES: usize = 1000;
/// The most toxics one proxy holds: every chunk passes through each.
pub const MAX_TOXICS: usize = 64;

/// The most connections one proxy holds open at once: past it a new client is closed at once.
/// Bounds what a proxy pointed at itself (or at another proxy pointed back) can take.
pub const MAX_LINKS: usize = 1024;

struct Running {
    cancel: CancellationToken,
    accept: JoinHandle<()>,
    links: TaskTracker,
    /// The listener's place in the descriptor pool, given back when it stops.
    _place: OwnedSemaphorePermit,
}

/// One proxy: a listener forwarding to an upstream, with toxics.
pub struct Proxy {
    name: String,
    listen: String,
    upstream: String,
    toxics: watch::Sender<Arc<Vec<Toxic>>>,
    running: Option<Running>,
    /// What its clients sent and got back (kept across stops and restarts).
    witness: Arc<Log>,
}

/// What a create or update asks for.
#[derive(Debug, Clone)]
pub struct ProxySpec {
    /// Unique name.
    pub name: String,
    /// Address to listen on (`host:port`; port 0 picks one).
    pub listen: String,
    /// Address to forward to.
    pub upstream: String,
    /// Whether to listen at all.
    pub enabled: bool,
}

impl ProxySpec {
    /// Parses one proxy of a create or populate body. Missing strings are empty (validated
    /// later, naming the field); `enabled` defaults to true, as in Toxiproxy.
    pub fn from_json(value: &Value) -> Result<Self, ApiError> {
        let Value::Object(obj) = value else {
            return Err(ApiError::BadRequestBody(format!("a proxy must be a JSON object, got {value}")));
        };
        let field = |k: &str| -> Result<String, ApiError> {
            match obj.get(k) {
                None | Some(Value::Null) => Ok(String::new()),
                Some(Value::String(s)) => Ok(s.clone()),
                Some(v) => Err(ApiError::BadRequestBody(format!("`{k}` must be a string, got {v}"))),
            }
        };
        let enabled = match obj.get("enabled") {
            None | Some(Value::Null) => true,
            Some(Value::Bool(b)) => *b,
            Some(v) => return Err(ApiError::BadRequestBody(format!("`enabled` must be true or false, got {v}"))),
        };
        Ok(Self { name: field("name")?, listen: field("listen")?, upstream: field("upstream")?, enabled })
    }

    /// Parses a populate body (or `-config` file): an array of proxies, or `{"proxies": [...]}`.
    pub fn list_from_json(body: &[u8]) -> Result<Vec<Self>, ApiError> {
        let value: Value = serde_json::from_slice(body).map_err(|e| ApiError::BadRequestBody(e.to_string()))?;
        let items = match &value {
            Value::Array(items) => items,
            Value::Object(o) => match o.get("proxies") {
                Some(Value::Array(items)) => items,
                _ => return Err(ApiError::BadRequestBody("expected a JSON array of proxies".into())),
            },
            _ => return Err(ApiError::BadRequestBody("expected a JSON array of proxies".into())),
        };
        items.iter().map(Self::from_json).collect()
    }
}

impl Proxy {
    fn new(spec: &ProxySpec, scripts: &SharedScripts) -> Self {
        Self {
            name: spec.name.clone(),
            listen: spec.listen.clone(),
            upstream: spec.upstream.clone(),
            toxics: watch::Sender::new(Arc::new(Vec::new())),
            running: None,
            witness: Log::new(scripts.clone()),
        }
    }

    /// The JSON Toxiproxy shows for a proxy.
    #[must_use]
    pub fn to_json(&self) -> Value {
        serde_json::json!({
            "name": self.name,
            "listen": self.listen,
            "upstream": self.upstream,
            "enabled": self.running.is_some(),
            "toxics": self.toxics_json(),
        })
    }

    /// The toxics as JSON, in order.
    #[must_use]
    pub fn toxics_json(&self) -> Value {
        Value::Array(self.toxics.borrow().iter().map(Toxic::to_json).collect())
    }

    async fn start(&mut self, seeds: &Arc<AtomicU64>, descriptors: &Descriptors) -> Result<(), ApiError> {
        if self.running.is_some() {
            return Ok(());
        }
        let place = descriptors
            .listener()
            .ok_or_else(|| ApiError::Listen { addr: self.listen.clone(), reason: spent(descriptors) })?;
        let addr = normalize_listen(&self.listen);
        let listener = TcpListener::bind(&addr)
            .await
            .map_err(|e| ApiError::Listen { addr: self.listen.clone(), reason: e.to_string() })?;
        if let Ok(bound) = listener.local_addr() {
            self.listen = bound.to_string();
        }
        let cancel = CancellationToken::new();
        let links = TaskTracker::new();
        let accept = tokio::spawn(accept_loop(
            listener,
            self.upstream.clone(),
            self.toxics.subscribe(),
            cancel.clone(),
            links.clone(),
            (seeds.clone(), descriptors.clone()),
            (self.witness.clone(), self.name.clone()),
        ));
        info!(name = %self.name, listen = %self.listen, upstream = %self.upstream, "started proxy");
        self.running = Some(Running { cancel, accept, links, _place: place });
        Ok(())
    }

    async fn stop(&mut self) {
        let Some(run) = self.running.take() else { return };
        run.cancel.cancel();
        // Awaiting the accept task drops the listener: the port is free when this returns.
        let _ = run.accept.await;
        run.links.close();
        if tokio::time::timeout(STOP_GRACE, run.links.wait()).await.is_err() {
            warn!(name = %self.name, "connections did not close within the grace period");
        }
        info!(name = %self.name, "terminated proxy");
    }
}

/// Go's `:port` listens on every interface; tokio needs a host.
fn normalize_listen(listen: &str) -> String {
    match listen {
        "" => "0.0.0.0:0".to_owned(),
        l if l.starts_with(':') => format!("0.0.0.0{l}"),
        l => l.to_owned(),
    }
}

async fn accept_loop(
    listener: TcpListener,
    upstream: String,
    toxics: link::Toxics,
    cancel: CancellationToken,
    links: TaskTracker,
    (seeds, descriptors): (Arc<AtomicU64>, Descriptors),
    (witness, name): (Arc<Log>, String),
) {
    // Bounded by the proxy's life: ends when the proxy stops.
    loop {
        let accepted = tokio::select! {
            () = cancel.cancelled() => return,
            a = listener.accept() => a,
        };
        match accepted {
            Ok((client, peer)) if links.len() >= MAX_LINKS => {
                warn!(%peer, limit = MAX_LINKS, "connection refused: the proxy holds too many");
                drop(client);
            }
            Ok((client, peer)) => {
                let Some(places) = descriptors.link() else {
                    warn!(%peer, proxy = %name, reason = %spent(&descriptors), "connection refused");
                    drop(client);
                    continue;
                };
                let seed = seeds.fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed);
                let w = witness.conn(&name);
                let serve = link::serve(client, upstream.clone(), toxics.clone(), cancel.child_token(), seed, w);
                links.spawn(async move {
                    serve.await;
                    drop(places);
                });
            }
            Err(e) => {
                warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

/// Why a listener or link found no descriptor, and the fix.
fn spent(d: &Descriptors) -> String {
    format!(
        "this server's descriptors are spent ({} of {} in use, {} kept for the API): close connections or raise the open-file limit (`ulimit -n`)",
        d.in_use(),
        d.size(),
        crate::descriptors::RESERVE
    )
}

/// Every proxy, by name.
pub struct Collection {
    proxies: tokio::sync::Mutex<BTreeMap<String, Proxy>>,
    seeds: Arc<AtomicU64>,
    /// Where listeners and links take their descriptors from.
    descriptors: Descriptors,
    /// Where the API listens (no proxy may forward there).
    api: std::sync::OnceLock<String>,
    /// The Lua scripts the witnesses saw, shared by every proxy.
    scripts: SharedScripts,
}

impl Collection {
    /// An empty collection; `seed` drives toxicity rolls and jitter. Its descriptor pool is
    /// sized from the process's open-file limit.
    #[must_use]
    pub fn new(seed: u64) -> Self {
        Self::with_descriptors(seed, Descriptors::from_limit())
    }

    /// An empty collection drawing its descriptors from `descriptors`.
    #[must_use]
    pub fn with_descriptors(seed: u64, descriptors: Descriptors) -> Self {
        Self {
            proxies: tokio::sync::Mutex::new(BTreeMap::new()),
            seeds: Arc::new(AtomicU64::new(seed)),
            descriptors,
            api: std::sync::OnceLock::new(),
            scripts: SharedScripts::default(),
        }
    }

    /// Records where the API listens: no proxy may forward to it.
    pub fn serving_at(&self, addr: &str) {
        let _ = self.api.set(addr.to_owned());
    }

    /// Refuses an upstream that is one of this server's own listen addresses (the API's or any
    /// in `listens`): 400, naming both.
    fn refuse_loop(&self, upstream: &str, mut listens: Vec<String>) -> Result<(), ApiError> {
        listens.extend(self.api.get().cloned());
        match listens.iter().find(|l| loops_back(upstream, l)) {
            Some(l) => Err(ApiError::BadRequestBody(format!(
                "upstream {upstream} is this server's own listen address {l}: every connection would loop back into it"
            ))),
            None => Ok(()),
        }
    }

    /// Every proxy as `{name: proxy}`.
    pub async fn index(&self) -> Value {
        let proxies = self.proxies.lock().await;
        Value::Object(proxies.iter().map(|(n, p)| (n.clone(), p.to_json())).collect())
    }

    /// Creates and (if enabled) starts a proxy.
    pub async fn create(&self, spec: ProxySpec) -> Result<Value, ApiError> {
        validate(&spec)?;
        let mut proxies = self.proxies.lock().await;
        if proxies.contains_key(&spec.name) {
            return Err(ApiError::ProxyAlreadyExists);
        }
        if proxies.len() >= MAX_PROXIES {
            return Err(ApiError::BadRequestBody(format!(
                "this server holds at most {MAX_PROXIES} proxies: delete one first"
            )));
        }
        let listens = |own: &str| {
            std::iter::once(own).chain(proxies.values().map(|p| p.listen.as_str())).map(str::to_owned).collect()
        };
        self.refuse_loop(&spec.upstream, listens(&spec.listen))?;
        let mut proxy = Proxy::new(&spec, &self.scripts);
        if spec.enabled {
            proxy.start(&self.seeds, &self.descriptors).await?;
            // Port 0 binds a port only now: the loop is visible only now.
            if let Err(e) = self.refuse_loop(&proxy.upstream, listens(&proxy.listen)) {
                proxy.stop().await;
                return Err(e);
            }
        }
        let json = proxy.to_json();
        proxies.insert(spec.name, proxy);
        Ok(json)
    }

    /// Creates or updates each proxy in order; stops at the first error, returning what was done.
    pub async fn populate(&self, specs: Vec<ProxySpec>) -> (Vec<Value>, Option<ApiError>) {
        if specs.len() > MAX_PROXIES {
            let e = format!("a populate of {} proxies: this server holds at most {MAX_PROXIES}", specs.len());
            return (Vec::new(), Some(ApiError::BadRequestBody(e)));
        }
        let mut done = Vec::new();
        // What each step changed, to undo it if a later one fails: all or nothing, as Toxiproxy.
        let mut undo: Vec<Step> = Vec::new();
        for spec in specs {
            let before = self
                .proxies
                .lock()
                .await
                .get(&spec.name)
                .map(|p| (p.listen.clone(), p.upstream.clone(), p.running.is_some()));
            let name = spec.name.clone();
            let result = match before {
                Some(_) => {
                    let (listen, upstream) = (Some(spec.listen.clone()), Some(spec.upstream.clone()));
                    self.update(&name, listen, upstream, Some(spec.enabled)).await
                }
                None => self.create(spec).await,
            };
            match result {
                Ok(json) => {
                    done.push(json);
                    undo.push((name, before));
                }
                Err(e) => {
                    self.undo(undo).await;
                    return (Vec::new(), Some(e));
                }
            }
        }
        (done, None)
    }

    /// Undoes a failed populate's steps, the last first: a proxy it created is deleted, one it
    /// updated gets its listen, upstream and state back.
    async fn undo(&self, steps: Vec<Step>) {
        for (name, before) in steps.into_iter().rev() {
            let undone = match before {
                None => self.delete(&name).await,
                Some((listen, upstream, enabled)) => {
                    self.update(&name, Some(listen), Some(upstream), Some(enabled)).await.map(|_| ())
                }
            };
            if let Err(e) = undone {
                warn!(%name, error = %e, "a failed populate could not undo this proxy");
            }
        }
    }

    /// One proxy.
    pub async fn show(&self, name: &str) -> Result<Value, ApiError> {
        self.proxies.lock().await.get(name).map(Proxy::to_json).ok_or(ApiError::ProxyNotFound)
    }

    /// Partial update. A changed listen or upstream restarts the proxy, closing its connections.
    pub async fn update(
        &self,
        name: &str,
        listen: Option<String>,
        upstream: Option<String>,
        enabled: Option<bool>,
    ) -> Result<Value, ApiError> {
        let mut proxies = self.proxies.lock().await;
        let listen = listen.filter(|l| !l.is_empty());
        let upstream = upstream.filter(|u| !u.is_empty());
        {
            let current = proxies.get(name).ok_or(ApiError::ProxyNotFound)?;
            let next_upstream = upstream.as_deref().unwrap_or(&current.upstream);
            let next_listen = listen.as_deref().unwrap_or(&current.listen);
            let others = proxies.iter().filter(|(n, _)| n.as_str() != name).map(|(_, p)| p.listen.clone());
            self.refuse_loop(next_upstream, std::iter::once(next_listen.to_owned()).chain(others).collect())?;
        }
        let proxy = proxies.get_mut(name).ok_or(ApiError::ProxyNotFound)?;
        let was_enabled = proxy.running.is_some();
        let moved = listen.as_ref().is_some_and(|l| *l != proxy.listen)
            || upstream.as_ref().is_some_and(|u| *u != proxy.upstream);
        if moved {
            proxy.stop().await;
            if let Some(l) = listen {
                proxy.listen = l;
            }
            if let Some(u) = upstream {
                proxy.upstream = u;
            }
        }
        match enabled.unwrap_or(was_enabled) {
            true => proxy.start(&self.seeds, &self.descriptors).await?,
            false => proxy.stop().await,
        }
        Ok(proxy.to_json())
    }

    /// Stops and removes a proxy.
    pub async fn delete(&self, name: &str) -> Result<(), ApiError> {
        // Out of the collection under the lock; stopped without it, so the API keeps answering
        // while the proxy's connections close.
        let mut proxy = self.proxies.lock().await.remove(name).ok_or(ApiError::ProxyNotFound)?;
        proxy.stop().await;
        Ok(())
    }

    /// Re-enables every proxy and removes every toxic.
    pub async fn reset(&self) -> Result<(), ApiError> {
        let mut proxies = self.proxies.lock().await;
        for proxy in proxies.values_mut() {
            proxy.toxics.send_replace(Arc::new(Vec::new()));
            proxy.start(&self.seeds, &self.descriptors).await?;
        }
        Ok(())
    }

    /// What a proxy's clients sent and got back: records after seq `after`, at most `limit`.
    pub async fn witness(&self, proxy: &str, after: u64, limit: usize) -> Result<Value, ApiError> {
        let log = self.proxies.lock().await.get(proxy).map(|p| p.witness.clone()).ok_or(ApiError::ProxyNotFound)?;
        Ok(log.page(after, limit))
    }

    /// The toxics of a proxy.
    pub async fn toxics(&self, proxy: &str) -> Result<Value, ApiError> {
        self.proxies.lock().await.get(proxy).map(Proxy::toxics_json).ok_or(ApiError::ProxyNotFound)
    }

    /// Adds a toxic; it applies to open connections at once.
    pub async fn add_toxic(&self, proxy: &str, body: &[u8]) -> Result<Value, ApiError> {
        let proxies = self.proxies.lock().await;
        let p = proxies.get(proxy).ok_or(ApiError::ProxyNotFound)?;
        let toxic = Toxic::from_json(body)?;
        if p.toxics.borrow().iter().any(|t| t.name == toxic.name) {
            return Err(ApiError::ToxicAlreadyExists);
        }
        if p.toxics.borrow().len() >= MAX_TOXICS {
            return Err(ApiError::BadRequestBody(format!(
                "proxy {proxy} holds at most {MAX_TOXICS} toxics (each chunk passes through every one): remove one first"
            )));
        }
        let json = toxic.to_json();
        p.toxics.send_modify(|list| Arc::make_mut(list).push(toxic));
        Ok(json)
    }

    /// One toxic.
    pub async fn toxic(&self, proxy: &str, toxic: &str) -> Result<Value, ApiError> {
        let proxies = self.proxies.lock().await;
        let p = proxies.get(proxy).ok_or(ApiError::ProxyNotFound)?;
        let list = p.toxics.borrow();
        list.iter().find(|t| t.name == toxic).map(Toxic::to_json).ok_or(ApiError::ToxicNotFound)
    }

    /// Updates a toxic's toxicity and attributes.
    pub async fn update_toxic(&self, proxy: &str, toxic: &str, body: &[u8]) -> Result<Value, ApiError> {
        let proxies = self.proxies.lock().await;
        let p = proxies.get(proxy).ok_or(ApiError::ProxyNotFound)?;
        let current = p.toxics.borrow().iter().find(|t| t.name == toxic).cloned().ok_or(ApiError::ToxicNotFound)?;
        let next = current.update_from_json(body)?;
        let json = next.to_json();
        p.toxics.send_modify(|list| {
            if let Some(slot) = Arc::make_mut(list).iter_mut().find(|t| t.name == toxic) {
                *slot = next;
            }
        });
        Ok(json)
    }

    /// Removes a toxic; open connections stop suffering it at once.
    pub async fn remove_toxic(&self, proxy: &str, toxic: &str) -> Result<(), ApiError> {
        let proxies = self.proxies.lock().await;
        let p = proxies.get(proxy).ok_or(ApiError::ProxyNotFound)?;
        if !p.toxics.borrow().iter().any(|t| t.name == toxic) {
            return Err(ApiError::ToxicNotFound);
        }
        p.toxics.send_modify(|list| Arc::make_mut(list).retain(|t| t.name != toxic));
        Ok(())
    }

    /// Stops every proxy (server shutdown).
    pub async fn shutdown(&self) {
        let mut proxies = self.proxies.lock().await;
        for proxy in proxies.values_mut() {
            proxy.stop().await;
        }
    }
}

fn validate(spec: &ProxySpec) -> Result<(), ApiError> {
    if spec.name.is_empty() {
        return Err(ApiError::MissingField("name"));
    }
    if !crate::toxic::addressable(&spec.name) {
        return Err(ApiError::BadRequestBody(format!(
            "proxy name {:?} must be 1 to 128 of letters, digits, '.', '_' and '-' (it is a path segment)",
            spec.name
        )));
    }
    if spec.upstream.is_empty() {
        return Err(ApiError::MissingField("upstream"));
    }
    Ok(())
}

/// Whether `upstream` names the very address `listen` listens on: the same port (as a number),
/// and a host that is the same address, or one of this machine's own in any spelling: a loopback
/// or unspecified address, `localhost`, an IPv4-mapped IPv6 address of one, the classic IPv4
/// forms (`127.1`, `2130706433`, `0x7f.1`), or an address of one of its interfaces. Every
/// connection would then loop back into the proxy, each opening another. Names are not resolved
/// (a container's name is an ordinary upstream), but for `localhost`.
fn loops_back(upstream: &str, listen: &str) -> bool {
    let split = |a: &str| -> Option<(String, u16)> {
        let (host, port) = a.rsplit_once(':')?;
        Some((host.trim_matches(['[', ']']).to_ascii_lowercase(), port.parse().ok()?))
    };
    let (Some((uh, up)), Some((lh, lp))) = (split(upstream), split(&normalize_listen(listen))) else { return false };
    if up != lp || lp == 0 {
        return false;
    }
    match (host_ip(&uh), host_ip(&lh)) {
        (Some(u), Some(l)) if u == l => true,
        (Some(u), _) => own_address(u),
        (None, _) => uh == lh || matches!(uh.trim_end_matches('.'), "localhost" | "ip6-localhost"),
    }
}

/// A host as an address, in any spelling the system's resolver would read as one (IPv4-mapped
/// IPv6 as the IPv4 address it maps); `None` for a name. The empty host is the unspecified one.
fn host_ip(h: &str) -> Option<std::net::IpAddr> {
    use std::net::IpAddr;
    if h.is_empty() {
        return Some(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED));
    }
    match h.parse::<IpAddr>() {
        Ok(IpAddr::V6(v6)) => Some(v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4)),
        Ok(ip) => Some(ip),
        Err(_) => inet_aton(h).map(IpAddr::V4),
    }
}

/// The classic IPv4 spellings (`inet_aton`): one to four parts, each decimal, octal (`0` first)
/// or hex (`0x` first), the last part filling the bytes left.
fn inet_aton(s: &str) -> Option<std::net::Ipv4Addr> {
    let parts: Vec<u64> = s
        .split('.')
        .map(|p| {
            let (digits, radix) = match p.strip_prefix("0x").or_else(|| p.strip_prefix("0X")) {
                Some(hex) => (hex, 16),
                None if p.len() > 1 && p.starts_with('0') => (&p[1..], 8),
                None => (p, 10),
            };
            if digits.is_empty() && radix != 16 {
                return None;
            }
            u64::from_str_radix(if digits.is_empty() { "0" } else { digits }, radix).ok()
        })
        .collect::<Option<_>>()?;
    let (last, head) = parts.split_last()?;
    if head.len() > 3 || head.iter().any(|b| *b > 255) {
        return None;
    }
    let room = 8 * (4 - head.len() as u32);
    if room < 64 && *last >= 1u64 << room {
        return None;
    }
    let value = head.iter().enumerate().fold(*last, |v, (i, b)| v | (b << (24 - 8 * i as u32)));
    u32::try_from(value).ok().map(std::net::Ipv4Addr::from)
}

/// Whether `ip` is this machine's: loopback, unspecified, or bindable here (an address of one of
/// its interfaces: binding any other fails).
fn own_address(ip: std::net::IpAddr) -> bool {
    ip.is_loopback() || ip.is_unspecified() || std::net::UdpSocket::bind((ip, 0)).is_ok()
}

#[cfg(test)]
mod loop_tests {
    use super::loops_back;

    #[test]
    fn every_spelling_of_this_machine_at_the_listen_port_is_a_loop() {
        let listen = "127.0.0.1:8474";
        for own in [
            "127.0.0.1:8474",
            "localhost:8474",
            "localhost.:8474",
            "LOCALHOST:8474",
            "127.1:8474",
            "0:8474",
            "2130706433:8474",
            "0x7f.1:8474",
            "0177.0.0.1:8474",
            "[::1]:8474",
            "[::ffff:127.0.0.1]:8474",
            "[::]:8474",
            "0.0.0.0:8474",
            "127.0.0.1:08474",
            ":8474",
        ] {
            assert!(loops_back(own, listen), "{own} must be refused");
        }
        // This machine's own interface address, whatever it is.
        let out = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
        if out.connect("10.255.255.1:9").is_ok() {
            let mine = out.local_addr().unwrap().ip();
            if !mine.is_unspecified() {
                assert!(loops_back(&format!("{mine}:8474"), "0.0.0.0:8474"), "{mine}");
            }
        }
        for other in ["10.255.255.1:8474", "redis-primary:8474", "127.0.0.1:6379", "1.2.3.4.5:8474", "256.1:8474"] {
            assert!(!loops_back(other, listen), "{other} is not this listener");
        }
        assert!(!loops_back("127.0.0.1:0", "127.0.0.1:0"), "port 0 is not known yet");
    }
}
