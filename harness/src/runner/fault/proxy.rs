//! Faults in the per-node proxies: a node's links cut (`partition`), slowed (`slow_redis`),
//! losing replies (`lose_replies`), and the store slow or failing for everyone.

use std::time::{Duration, Instant};

use leasequake_reports::history::LinkCut;
use leasequake_toxiproxy::{Stream, ToxicSpec};

use super::{Applied, Heal, World};
use crate::env::NodeLink;
use crate::scenario::{Aimed, Direction, Fault, FaultKind, Link, Mode};

/// `partition`: the node's links cut (a reset, or a blackhole that answers nothing), each verified
/// by a PING through that very link.
pub(super) async fn partition(w: &World<'_>, id: u64, f: &Fault, index: u32) -> Result<String, String> {
    let (proxy, env) = (w.proxy, w.env);
    let blackhole = f.mode == Some(Mode::Blackhole);
    let mut seen = Vec::new();
    for (name, slot) in proxies_of(index, f.link) {
        let toxic = if blackhole {
            ToxicSpec::timeout(Stream::Upstream, 0)
        } else {
            ToxicSpec::reset_peer(Stream::Downstream, 0)
        };
        proxy.add_toxic(&name, &toxic.named(toxic_name(id))).await.map_err(|e| e.to_string())?;
        let got = probe(env.proxy_ports[slot]).await;
        let ok = if blackhole { got == "silent" } else { matches!(got, "reset" | "closed" | "refused") };
        if !ok {
            return Err(format!("{name}: the probe got `{got}` through the cut link"));
        }
        seen.push(format!("{name}: probe {got}"));
    }
    Ok(seen.join(", "))
}

pub(super) async fn heal_partition(w: &World<'_>, a: &Applied) -> Heal {
    let proxy = w.proxy;
    let mut failed = Vec::new();
    for (name, _) in proxies_of(a.index, a.fault.link) {
        match proxy.remove_toxic(&name, &toxic_name(a.id)).await {
            Ok(()) => {}
            Err(e) if e.to_string().contains("404") || e.to_string().contains("not found") => {}
            Err(e) => failed.push(format!("{name}: {e}")),
        }
    }
    if failed.is_empty() {
        Heal::Done("toxics removed".into())
    } else {
        Heal::Failed(format!("removing toxics failed: {}", failed.join("; ")))
    }
}

/// The streams a `slow_redis` delays.
fn slow_redis_streams(f: &Fault) -> &'static [Stream] {
    let default = if f.command.is_some() { Direction::Requests } else { Direction::Replies };
    match f.direction.unwrap_or(default) {
        Direction::Replies => &[Stream::Downstream],
        Direction::Requests => &[Stream::Upstream],
        Direction::Both => &[Stream::Upstream, Stream::Downstream],
    }
}

fn slow_redis_toxic(id: u64, stream: usize) -> String {
    format!("{}-{stream}", toxic_name(id))
}

/// `slow_redis`: latency on one node's Redis link, verified by timing a PING through that very
/// link (the node's own connections carry the same toxics): at least the latency less the jitter,
/// once per delayed direction.
pub(super) async fn slow_redis(w: &World<'_>, id: u64, f: &Fault, index: u32) -> Result<String, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    if let Some(aimed) = f.command {
        return slow_aimed(w, id, f, index, aimed).await;
    }
    let (latency, jitter) = (f.latency_ms.unwrap_or(0), f.jitter_ms.unwrap_or(0));
    let streams = slow_redis_streams(f);
    let name = format!("n{index}-redis");
    for (k, stream) in streams.iter().enumerate() {
        let toxic = ToxicSpec::latency(*stream, latency, jitter).named(slow_redis_toxic(id, k));
        w.proxy.add_toxic(&name, &toxic).await.map_err(|e| e.to_string())?;
    }
    let ways = streams.len() as u64;
    let floor = latency.saturating_sub(jitter).saturating_mul(ways);
    let limit = Duration::from_millis(latency.saturating_add(jitter).saturating_mul(ways).saturating_add(2000));
    let port = w.env.node_port(index, NodeLink::Redis);
    let t = Instant::now();
    let answer = tokio::time::timeout(limit, async {
        let mut c = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
        c.write_all(b"PING\r\n").await?;
        let mut buf = [0u8; 64];
        c.read(&mut buf).await
    })
    .await;
    let took = t.elapsed().as_millis() as u64;
    match answer {
        Ok(Ok(n)) if n > 0 && took >= floor => Ok(format!(
            "{name}: a PING through it answered after {took} ms (latency {latency} ± {jitter} ms, {ways} way(s))"
        )),
        Ok(Ok(n)) if n > 0 => Err(format!("{name}: a PING through it answered after {took} ms, under {floor} ms")),
        Ok(Ok(_)) => Err(format!("{name}: the probe's connection closed without an answer")),
        Ok(Err(e)) => Err(format!("{name}: the probe failed: {e}")),
        Err(_) => Err(format!("{name}: no answer to the probe within {} ms", limit.as_millis())),
    }
}

pub(super) async fn heal_slow_redis(w: &World<'_>, a: &Applied) -> Heal {
    let proxy = w.proxy;
    for (k, _) in slow_redis_streams(&a.fault).iter().enumerate() {
        let _ = proxy.remove_toxic(&format!("n{}-redis", a.index), &slow_redis_toxic(a.id, k)).await;
    }
    Heal::done("toxics removed")
}

/// `slow_redis` aimed at lease commands (`command`): a latency on the requests of those commands
/// alone (an extension of our proxy's), every other command at full speed. Verified from the
/// witness: a record of such a command, sent after the fault began, whose reply came at least the
/// latency less the jitter after the proxy read it; or, aimed at renewals or releases, the node
/// holds no lease (nothing to slow).
async fn slow_aimed(w: &World<'_>, id: u64, f: &Fault, index: u32, aimed: Aimed) -> Result<String, String> {
    let (latency, jitter) = (f.latency_ms.unwrap_or(0), f.jitter_ms.unwrap_or(0));
    let name = NodeLink::Redis.proxy(index);
    let key = w.lease.key();
    let from = witness_now(w, &name, "slow_redis aimed at commands").await?;
    let toxic = ToxicSpec::latency_aimed(&key, aimed.proxy_command(), latency, jitter).named(slow_redis_toxic(id, 0));
    w.proxy.add_toxic(&name, &toxic).await.map_err(|e| e.to_string())?;
    // The scripts the node's commands run by SHA1 were loaded before: learned from its whole record.
    let mut scripts = match w.proxy.witness(&name, 0).await {
        Ok(Some(page)) => leasequake_reports::wire::Scripts::learn(&page.records),
        _ => leasequake_reports::wire::Scripts::default(),
    };
    let floor_ns = latency.saturating_sub(jitter).saturating_mul(1_000_000);
    let (node, what) = (format!("n{index}"), aimed.as_str());
    let limit = Duration::from_millis(w.s.lease.ttl_ms.saturating_mul(2).saturating_add(latency).saturating_add(2000));
    let began = Instant::now();
    // Bounded by `limit`.
    while began.elapsed() < limit {
        if let Ok(Some(page)) = w.proxy.witness(&name, from).await {
            scripts = scripts.merged(leasequake_reports::wire::Scripts::learn(&page.records));
            let slowed = page.records.iter().enumerate().find(|(i, r)| {
                let op = leasequake_reports::wire::lease_op(r, page.records[..*i].iter(), &key, &scripts);
                aimed.hits(op) && r.reply_ns.is_some_and(|at| at.saturating_sub(r.sent_ns) >= floor_ns)
            });
            if let Some((_, r)) = slowed {
                let took = r.reply_ns.unwrap_or(r.sent_ns).saturating_sub(r.sent_ns) / 1_000_000;
                return Ok(format!(
                    "{name}: {node}'s {what} command (witness seq {}) answered {took} ms after the proxy read it (latency {latency} ± {jitter} ms, its requests only)",
                    r.seq
                ));
            }
        }
        if matches!(aimed, Aimed::Renewal | Aimed::Release) {
            if let Some(holder) = not_holding(w, &key, &node).await {
                return Ok(format!(
                    "aimed at {node}'s {what} commands on {name}; {node} does not hold the lease (holder: {holder}), so none to slow"
                ));
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(format!("{node} sent no {what} command of {key} that the latency slowed within {} ms", limit.as_millis()))
}

/// How long a connection lives under `lose_replies` before it is cut, ms.
const LOSE_REPLIES_CUT_MS: u64 = 100;

/// `lose_replies`: a `timeout` toxic on the replies of one node's Redis link (requests pass and
/// run; replies are dropped; the connection is cut after 100 ms). Verified end to end: a probe
/// sends `AUTH` and a `SET` of a probe key through that very link, hears nothing, sees the
/// connection cut, and then finds the key set on the primary: the command ran, its reply was lost.
pub(super) async fn lose_replies(w: &World<'_>, id: u64, index: u32) -> Result<String, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let name = format!("n{index}-redis");
    let toxic = ToxicSpec::timeout(Stream::Downstream, LOSE_REPLIES_CUT_MS).named(toxic_name(id));
    w.proxy.add_toxic(&name, &toxic).await.map_err(|e| e.to_string())?;
    let key = format!("leasequake:probe:lose-replies:{id}");
    let password = w.env.redis_password();
    let request = format!(
        "*2\r\n$4\r\nAUTH\r\n${}\r\n{password}\r\n*5\r\n$3\r\nSET\r\n${}\r\n{key}\r\n$1\r\n1\r\n$2\r\nPX\r\n$5\r\n60000\r\n",
        password.len(),
        key.len()
    );
    let port = w.env.node_port(index, NodeLink::Redis);
    let t = Instant::now();
    let heard = tokio::time::timeout(Duration::from_millis(LOSE_REPLIES_CUT_MS + 2000), async {
        let mut c = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
        c.write_all(request.as_bytes()).await?;
        let mut buf = [0u8; 256];
        c.read(&mut buf).await
    })
    .await;
    let took = t.elapsed().as_millis();
    match heard {
        Ok(Ok(0)) | Ok(Err(_)) => {}
        Ok(Ok(n)) => return Err(format!("{name}: the probe got a {n}-byte reply through a link that loses replies")),
        Err(_) => {
            return Err(format!("{name}: the probe's connection was not cut within {} ms", LOSE_REPLIES_CUT_MS + 2000))
        }
    }
    let got = w.env.redis_cli("redis-primary", &["GET", &key]).await.map_err(|e| e.to_string())?;
    if got.trim() != "1" {
        return Err(format!("{name}: the probe's SET did not reach Redis (GET answered `{}`)", got.trim()));
    }
    let _ = w.env.redis_cli("redis-primary", &["DEL", &key]).await;
    Ok(format!(
        "{name}: a probe's SET ran on redis-primary, its reply never came, and the connection was cut after {took} ms"
    ))
}

/// The last seq the witness of proxy `name` recorded (what a fault's verification reads after);
/// `what` needs the witness, which the official Toxiproxy lacks.
async fn witness_now(w: &World<'_>, name: &str, what: &str) -> Result<u64, String> {
    match w.proxy.witness(name, u64::MAX).await {
        Ok(Some(page)) => Ok(page.next.saturating_sub(1)),
        Ok(None) => Err(format!("{what} needs the proxy's witness (the official Toxiproxy has none)")),
        Err(e) => Err(e.to_string()),
    }
}

/// Who holds the lease on the primary when `node` does not ("nobody" for none): an aimed fault
/// then has no command of `node`'s to act on. `None` while `node` holds it.
async fn not_holding(w: &World<'_>, key: &str, node: &str) -> Option<String> {
    let holder = w.env.redis_cli("redis-primary", &["GET", key]).await.unwrap_or_default();
    let holder = holder.trim();
    (!w.lease.held_by(holder, node)).then(|| if holder.is_empty() { "nobody".to_owned() } else { holder.to_owned() })
}

/// `lose_replies` aimed at one lease command (`command`): the proxy loses the reply to the node's
/// next such command, once, and closes that connection; every other command is answered.
/// Verified from the witness's own record: that command, answered by Redis and marked lost; or,
/// for a renewal or a release, the node holds no lease (nothing to aim at).
pub(super) async fn lose_aimed(w: &World<'_>, id: u64, index: u32, aimed: Aimed) -> Result<String, String> {
    let name = NodeLink::Redis.proxy(index);
    let key = w.lease.key();
    let from = witness_now(w, &name, "an aimed lose_replies").await?;
    let command = aimed.proxy_command();
    w.proxy
        .add_toxic(&name, &ToxicSpec::lose_reply(&key, command).named(toxic_name(id)))
        .await
        .map_err(|e| e.to_string())?;
    let node = format!("n{index}");
    let what = aimed.as_str();
    let limit = Duration::from_millis(w.s.lease.ttl_ms.saturating_mul(2).saturating_add(2000));
    let began = Instant::now();
    let lost = async || {
        match w.proxy.witness(&name, from).await {
        Ok(Some(page)) => page.records.into_iter().find(|r| r.lost).map(|r| {
            let answer = r.reply.as_ref().map_or("?".into(), |a| format!("{a:?}"));
            format!(
                "{name} lost the reply to {node}'s {what} of {key} (witness seq {}; Redis answered {}) and closed its connection, {} ms after the fault began",
                r.seq,
                answer.chars().take(80).collect::<String>(),
                began.elapsed().as_millis()
            )
        }),
        _ => None,
    }
    };
    // Bounded by `limit`.
    while began.elapsed() < limit {
        if let Some(seen) = lost().await {
            return Ok(seen);
        }
        if matches!(aimed, Aimed::Renewal | Aimed::Release) {
            if let Some(holder) = not_holding(w, &key, &node).await {
                // The aimed command may have run between the two reads: the witness first.
                if let Some(seen) = lost().await {
                    return Ok(seen);
                }
                return Ok(format!(
                    "aimed at {node}'s next {what} on {name}; {node} does not hold the lease (holder: {holder}), so no {what} to lose"
                ));
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(format!(
        "{node} sent no {what} of {key} whose reply could be lost within {} ms of the fault",
        limit.as_millis()
    ))
}

pub(super) async fn heal_lose_replies(w: &World<'_>, a: &Applied) -> Heal {
    let proxy = w.proxy;
    let _ = proxy.remove_toxic(&format!("n{}-redis", a.index), &toxic_name(a.id)).await;
    Heal::done("toxic removed")
}

/// `stall_renewal` done to the wire, for a node whose lock renews out of its reach (hidden
/// renewals): the proxy holds the node's renewal commands of the lease key (and what follows them
/// on their connection) until the heal. Verified from the witness's own record: a renewal held;
/// or the node holds no lease (nothing to stall), or the key left it.
pub(super) async fn stall_renewal(w: &World<'_>, id: u64, index: u32) -> Result<String, String> {
    let name = NodeLink::Redis.proxy(index);
    let key = w.lease.key();
    let from = witness_now(w, &name, "stall_renewal on the wire").await?;
    w.proxy.add_toxic(&name, &ToxicSpec::hold(&key).named(toxic_name(id))).await.map_err(|e| e.to_string())?;
    let node = format!("n{index}");
    let limit = Duration::from_millis(w.s.lease.ttl_ms.saturating_mul(2).saturating_add(2000));
    let began = Instant::now();
    // Bounded by `limit`.
    while began.elapsed() < limit {
        if let Ok(Some(page)) = w.proxy.witness(&name, from).await {
            if let Some(r) = page.records.iter().find(|r| r.held) {
                return Ok(format!(
                    "{name} holds {node}'s renewal of {key} (witness seq {}), {} ms after the stall began",
                    r.seq,
                    began.elapsed().as_millis()
                ));
            }
        }
        if let Some(holder) = not_holding(w, &key, &node).await {
            return Ok(format!(
                "the hold is on {name}; {node} does not hold the lease (holder: {holder}), so no renewal to stop"
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(format!("{node} holds the lease and sent no renewal within {} ms of the stall", limit.as_millis()))
}

/// Undoes [`stall_renewal`]: the held commands go on. `None` when the stall was not on the wire.
pub(super) async fn heal_stall(w: &World<'_>, a: &Applied) -> Option<Heal> {
    let name = NodeLink::Redis.proxy(a.index);
    w.proxy
        .remove_toxic(&name, &toxic_name(a.id))
        .await
        .ok()
        .map(|()| Heal::done("hold removed: the held commands went on"))
}

/// Whether node `index` makes its model calls through the model service: its protocol says it
/// must (version 4), or its model link already carried one.
pub(super) async fn calls_model_service(w: &World<'_>, index: u32) -> bool {
    let node = format!("n{index}");
    if w.lease.protocol(&node).is_some_and(|p| p >= 4) {
        return true;
    }
    matches!(w.proxy.witness(&NodeLink::Model.proxy(index), 0).await, Ok(Some(page)) if !page.records.is_empty())
}

/// `slow_model` on a node that calls the model service: latency on its model link's replies,
/// verified by a probe through that link (the node is asked nothing).
pub(super) async fn slow_model(w: &World<'_>, id: u64, f: &Fault, index: u32) -> Result<String, String> {
    let latency = f.latency_ms.unwrap_or(0);
    let name = NodeLink::Model.proxy(index);
    let toxic = ToxicSpec::latency(Stream::Downstream, latency, 0).named(toxic_name(id));
    w.proxy.add_toxic(&name, &toxic).await.map_err(|e| e.to_string())?;
    let port = w.env.node_port(index, NodeLink::Model);
    let t = Instant::now();
    let answer = leasequake_toxiproxy::http::exchange(&format!("127.0.0.1:{port}"), "GET", "/v1/health", None).await;
    let took = t.elapsed().as_millis() as u64;
    match answer {
        Ok((200, _)) if took >= latency => {
            Ok(format!("{name}: a probe through the model link answered in {took} ms (>= {latency} ms)"))
        }
        other => Err(format!("the probe through {name} answered {other:?} in {took} ms, expected >= {latency} ms")),
    }
}

/// Undoes [`slow_model`]; `None` when the fault was not applied on the link (the node was asked).
pub(super) async fn heal_slow_model(w: &World<'_>, a: &Applied) -> Option<Heal> {
    let name = NodeLink::Model.proxy(a.index);
    w.proxy.remove_toxic(&name, &toxic_name(a.id)).await.ok().map(|()| Heal::done("toxic removed"))
}

/// `slow_store` and `failing_store`: every node's store link, probed through one that carries no
/// other fault's toxic.
pub(super) async fn store(w: &World<'_>, id: u64, f: &Fault) -> Result<String, String> {
    let (proxy, env) = (w.proxy, w.env);
    // Every node's store proxy: the store itself is slow or failing, for everyone.
    let slow = f.kind == FaultKind::SlowStore;
    let latency = f.latency_ms.unwrap_or(0);
    for i in 1..=w.s.nodes.count {
        let toxic = if slow {
            ToxicSpec::latency(Stream::Downstream, latency, 0)
        } else {
            ToxicSpec::reset_peer(Stream::Downstream, 0)
        };
        proxy.add_toxic(&format!("n{i}-store"), &toxic.named(toxic_name(id))).await.map_err(|e| e.to_string())?;
    }
    // Probe through a store proxy that carries no other fault's toxic (faults overlap); if
    // every one does, the effect of this one cannot be told apart: not verified.
    let mut clean = None;
    for i in 1..=w.s.nodes.count {
        let name = format!("n{i}-store");
        if let Ok((200, body)) = proxy.request("GET", &format!("/proxies/{name}/toxics"), None).await {
            let toxics: Vec<serde_json::Value> = serde_json::from_str(&body).unwrap_or_default();
            if toxics.iter().all(|t| t["name"] == toxic_name(id).as_str()) {
                clean = Some((i, name));
                break;
            }
        }
    }
    let Some((i, probe_name)) = clean else {
        return Err("every store proxy also carries another fault's toxic: this one's effect cannot be probed".into());
    };
    let port = env.node_port(i, NodeLink::Store);
    if slow {
        let t = Instant::now();
        let answer =
            leasequake_toxiproxy::http::exchange(&format!("127.0.0.1:{port}"), "GET", "/v1/health", None).await;
        let took = t.elapsed().as_millis() as u64;
        match answer {
            Ok((200, _)) if took >= latency => {
                Ok(format!("store health answered in {took} ms through {probe_name} (>= {latency} ms)"))
            }
            other => {
                Err(format!("the probe through {probe_name} answered {other:?} in {took} ms, expected >= {latency} ms"))
            }
        }
    } else {
        match probe(port).await {
            got @ ("reset" | "closed" | "refused") => Ok(format!("{probe_name}: probe {got}")),
            got => Err(format!("{probe_name}: the probe got `{got}` through a failing store")),
        }
    }
}

pub(super) async fn heal_store(w: &World<'_>, a: &Applied) -> Heal {
    let proxy = w.proxy;
    for i in 1..=w.s.nodes.count {
        let _ = proxy.remove_toxic(&format!("n{i}-store"), &toxic_name(a.id)).await;
    }
    Heal::done("toxics removed")
}

fn proxies_of(index: u32, link: Option<Link>) -> Vec<(String, usize)> {
    let of = |l: NodeLink| (l.proxy(index), l.slot(index));
    match link.unwrap_or(Link::Both) {
        Link::Redis => vec![of(NodeLink::Redis)],
        Link::Store => vec![of(NodeLink::Store)],
        Link::Both => vec![of(NodeLink::Redis), of(NodeLink::Store)],
    }
}

/// The name of fault `id`'s toxics, so overlapping faults on one proxy stay apart.
fn toxic_name(id: u64) -> String {
    format!("fault-{id}")
}

/// Sends a PING through the proxy on host `port` and says what came back within 300 ms.
async fn probe(port: u16) -> &'static str {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(Ok(mut c)) =
        tokio::time::timeout(Duration::from_millis(300), tokio::net::TcpStream::connect(("127.0.0.1", port))).await
    else {
        return "refused";
    };
    if c.write_all(b"PING\r\n").await.is_err() {
        return "reset";
    }
    let mut buf = [0u8; 64];
    match tokio::time::timeout(Duration::from_millis(300), c.read(&mut buf)).await {
        Err(_) => "silent",
        Ok(Ok(0)) => "closed",
        Ok(Ok(_)) => "answered",
        Ok(Err(_)) => "reset",
    }
}

/// How a verified partition left its node's Redis link, for the checker: a blackhole holds a
/// command in flight (the probe was silent), a reset fails it at once (the probe was reset).
pub(super) fn redis_link(f: &Fault) -> Option<LinkCut> {
    let cuts_redis = f.kind == FaultKind::Partition && matches!(f.link.unwrap_or(Link::Both), Link::Redis | Link::Both);
    cuts_redis.then(|| if f.mode == Some(Mode::Blackhole) { LinkCut::Silent } else { LinkCut::Reset })
}
