//! Faults in Redis itself: the lease key deleted (`key_loss`), the primary's clock stepped
//! (`clock_jump`), writes paused (`pause_writes`), the primary restarted without persistence
//! (`redis_restart`), and a Sentinel failover (`failover`: stopped, isolated or handed over).

use std::time::{Duration, Instant};

use super::{unix_ms, Applied, Heal, World};
use crate::env::Environment;
use crate::scenario::{Fault, Mode};

/// `key_loss`: the lease key deleted on the primary.
pub(super) async fn key_loss(w: &World<'_>) -> Result<String, String> {
    let env = w.env;
    let key = w.lease.key();
    // GET and DEL in one exec: the holder named is the one whose key went.
    let out =
        env.redis_cli_batch("redis-primary", &format!("GET {key}\nDEL {key}\n")).await.map_err(|e| e.to_string())?;
    let mut replies = out.lines().map(str::trim);
    let holder = replies.next().unwrap_or("").to_owned();
    let deleted = replies.next().unwrap_or("");
    if holder.is_empty() {
        return Ok("the key was absent when deleted: nobody held the lease, nothing was lost".into());
    }
    // The probe: a later read no longer shows that token (the key is gone, or re-taken).
    let now = env.redis_cli("redis-primary", &["GET", &key]).await.map_err(|e| e.to_string())?;
    if now.trim() == holder {
        return Err(format!("the key still holds {holder} after DEL (answered {deleted})"));
    }
    let now = if now.trim().is_empty() { "absent".to_owned() } else { format!("held by {}", now.trim()) };
    Ok(format!("deleted the lease key on redis-primary while {holder} held it; now {now}"))
}

/// `clock_jump` on the primary.
pub(super) async fn clock_jump(w: &World<'_>, f: &Fault) -> Result<String, String> {
    let env = w.env;
    let jump = f.jump_ms.unwrap_or(0);
    let seen = set_clock_offset(env, jump).await?;
    // The probe: Redis's own TIME, against the host's clock.
    if (seen - jump).abs() > 1000 {
        return Err(format!("asked for a {jump:+} ms jump, but Redis's TIME is {seen:+} ms off the host's"));
    }
    Ok(format!(
        "redis-primary's wall clock moved {jump:+} ms: its TIME is {seen:+} ms off the host's (keys expire on it)"
    ))
}

pub(super) async fn heal_clock_jump(w: &World<'_>) -> Heal {
    match set_clock_offset(w.env, 0).await {
        Ok(seen) => Heal::Done(format!("clock set back to the host's (TIME now {seen:+} ms off)")),
        Err(e) => Heal::Failed(format!("setting the clock back failed: {e}")),
    }
}

/// Sets the primary's clock offset (the clock shim's file, see harness/clockshim) and returns how
/// far Redis's `TIME` then is from the host's clock, in ms.
async fn set_clock_offset(env: &Environment, offset_ms: i64) -> Result<i64, String> {
    // Fixed width, space padded: the shim reads the leading number through a shared mapping.
    let text = format!("{:<32}", format!("{offset_ms:+}"));
    let script =
        format!("printf '%s' \"$0\" | busybox dd of={} conv=notrunc 2>/dev/null", crate::image::CLOCK_OFFSET_FILE);
    env.exec("redis-primary", &["sh", "-c", &script, &text]).await.map_err(|e| e.to_string())?;
    let before = unix_ms();
    let time = env.redis_cli("redis-primary", &["TIME"]).await.map_err(|e| e.to_string())?;
    let after = unix_ms();
    let mut parts = time.lines().map(str::trim);
    let (Some(Ok(s)), Some(Ok(us))) = (parts.next().map(str::parse::<i64>), parts.next().map(str::parse::<i64>)) else {
        return Err(format!("TIME answered `{}`", time.trim()));
    };
    Ok(s * 1000 + us / 1000 - (before + after) / 2)
}

/// `pause_writes`: CLIENT PAUSE WRITE on the primary.
pub(super) async fn pause_writes(w: &World<'_>, f: &Fault) -> Result<String, String> {
    let env = w.env;
    let ms = f.duration_ms().to_string();
    // The pause and its probe in one exec: under load a second `docker exec` once started
    // more than 1 s later, when too little of a 2 s pause was left for the probe's write to
    // block for its full second (a soak INCONCLUSIVE, issue 19). Inside the container the
    // probe follows the pause within milliseconds.
    // The probe: a write from another client blocks (busybox timeout ends it), a read answers.
    let script = "redis-cli --no-auth-warning CLIENT PAUSE \"$0\" WRITE; \
                  timeout 1 redis-cli --no-auth-warning SET leasequake:probe 1 >/dev/null 2>&1; \
                  echo write=$?; redis-cli --no-auth-warning PING";
    let out = env.exec_authenticated("redis-primary", &["sh", "-c", script, &ms]).await.map_err(|e| e.to_string())?;
    let answer = out.lines().next().unwrap_or("").trim();
    if !answer.eq_ignore_ascii_case("ok") {
        return Err(format!("CLIENT PAUSE answered `{answer}`"));
    }
    let blocked = out.lines().any(|l| l.starts_with("write=") && l.trim() != "write=0");
    let reads = out.lines().any(|l| l.trim() == "PONG");
    match (blocked, reads) {
        (true, true) => Ok(format!("CLIENT PAUSE {ms} WRITE: a probe write blocked for 1 s, a PING answered")),
        _ => Err(format!("CLIENT PAUSE WRITE not in effect: the probe saw `{}`", out.trim().replace('\n', "; "))),
    }
}

pub(super) async fn heal_pause_writes(w: &World<'_>) -> Heal {
    match w.env.redis_cli("redis-primary", &["CLIENT", "UNPAUSE"]).await {
        Ok(a) if a.trim().eq_ignore_ascii_case("ok") => Heal::done("CLIENT UNPAUSE"),
        Ok(a) => Heal::Failed(format!("CLIENT UNPAUSE failed: `{}` (the pause ends by itself)", a.trim())),
        Err(e) => Heal::Failed(format!("CLIENT UNPAUSE failed: {e} (the pause ends by itself)")),
    }
}

/// `redis_restart`: the primary killed and started again, without persistence.
pub(super) async fn redis_restart(w: &World<'_>) -> Result<String, String> {
    let env = w.env;
    let docker = env.docker();
    let primary = env.container("redis-primary").ok_or("no redis-primary container")?.to_owned();
    let run_id = |info: String| {
        info.lines().find_map(|l| l.strip_prefix("run_id:")).map(|r| r.trim().to_owned()).unwrap_or_default()
    };
    let before = run_id(env.redis_cli("redis-primary", &["INFO", "server"]).await.map_err(|e| e.to_string())?);
    let began = Instant::now();
    docker.kill_container(&primary, Some(stop_signal("SIGKILL"))).await.map_err(|e| e.to_string())?;
    // Bounded: the container must be seen stopped before it is started again.
    for _ in 0..100 {
        let running = docker.inspect_container(&primary, None).await.ok().and_then(|i| i.state).and_then(|s| s.running);
        if running != Some(true) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    docker.start_container(&primary, None).await.map_err(|e| e.to_string())?;
    // The probe: a new Redis process (another run_id) answers, with an empty dataset.
    while began.elapsed() < Duration::from_secs(15) {
        if let Ok(info) = env.redis_cli("redis-primary", &["INFO", "server"]).await {
            let after = run_id(info);
            if !after.is_empty() && after != before {
                return Ok(format!(
                    "redis-primary killed and started again in {} ms: run_id {} -> {} (no persistence: its \
                     dataset, the lease key and the fence counter, started empty)",
                    began.elapsed().as_millis(),
                    &before[..8.min(before.len())],
                    &after[..8.min(after.len())]
                ));
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err("redis-primary did not come back with a new process within 15 s".into())
}

/// `failover`: Sentinel promotes the replica, after the primary was stopped (SIGSTOP), cut from
/// replication, or handed over (SENTINEL FAILOVER). Verified by the replica's own ROLE; with
/// `unreplicated_acquire`, also that a lease acknowledged by the cut primary is not on the new one.
pub(super) async fn failover(w: &World<'_>, f: &Fault) -> Result<String, String> {
    let began = Instant::now();
    let how = begin_failover(w, f).await?;
    // An acknowledged acquisition that can never replicate: the key goes on the cut primary,
    // and the next acquire (the nodes retry every few ms) lands there alone.
    let unreplicated = if f.mode == Some(Mode::Isolate) && f.unreplicated_acquire == Some(true) {
        Some(acquired_on_the_cut_primary(w).await?)
    } else {
        None
    };
    // The probe: the replica itself says it is master now. Bounded by Sentinel's timings.
    let env = w.env;
    let sentinel = &w.s.sentinel;
    let limit = Duration::from_millis(sentinel.down_after_ms + sentinel.failover_timeout_ms + 10_000);
    while !env.redis_cli("redis-replica", &["ROLE"]).await.unwrap_or_default().starts_with("master") {
        if began.elapsed() > limit {
            return Err(format!("Sentinel did not promote redis-replica within {} ms", limit.as_millis()));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let promoted_ms = began.elapsed().as_millis();
    // What the new primary knows of the lease (an acknowledged, unreplicated key is lost).
    let new_holder = env.redis_cli("redis-replica", &["GET", &w.lease.key()]).await.unwrap_or_default();
    let lost = match &unreplicated {
        Some(first) => lease_lost(w, first, new_holder.trim()).await?,
        None => String::new(),
    };
    let new_holder =
        if new_holder.trim().is_empty() { "no lease key".to_owned() } else { new_holder.trim().to_owned() };
    let follow = follow_promotion(w, f).await?;
    Ok(format!(
        "redis-replica is master {promoted_ms} ms after the primary was {how} (it holds {new_holder}){lost}; {follow}"
    ))
}

/// Starts the failover the fault's mode asks for; says what was done to the primary.
async fn begin_failover(w: &World<'_>, f: &Fault) -> Result<&'static str, String> {
    let env = w.env;
    let primary = env.container("redis-primary").ok_or("no redis-primary container")?.to_owned();
    match f.mode {
        Some(Mode::Manual) => {
            let answer = env
                .redis_cli("sentinel-1", &["SENTINEL", "FAILOVER", crate::env::MASTER_NAME])
                .await
                .map_err(|e| e.to_string())?;
            if !answer.trim().eq_ignore_ascii_case("ok") {
                return Err(format!("SENTINEL FAILOVER answered `{}`", answer.trim()));
            }
            Ok("handed over (SENTINEL FAILOVER)")
        }
        Some(Mode::Isolate) => {
            cut_primary(env, &primary).await?;
            Ok("cut from replication")
        }
        _ => {
            signal_primary(env, &primary, "SIGSTOP").await?;
            Ok("stopped (SIGSTOP)")
        }
    }
}

/// Sends `signal` to the primary's redis-server through the Docker API. SIGSTOP, not `docker
/// pause`: a `docker exec` (the observer's) racing a cgroup freeze leaves `runc init` frozen
/// inside it and hangs the Docker daemon (seen here on 20.10); a stopped process freezes Redis
/// alike and leaves exec working.
pub(crate) async fn signal_primary(env: &Environment, primary: &str, signal: &str) -> Result<(), String> {
    env.docker().kill_container(primary, Some(stop_signal(signal))).await.map_err(|e| e.to_string())
}

/// Cuts the primary from the replication network (Sentinels and the replica lose it).
pub(crate) async fn cut_primary(env: &Environment, primary: &str) -> Result<(), String> {
    use testcontainers::bollard::models::NetworkDisconnectRequest;
    let req = NetworkDisconnectRequest { container: primary.to_owned(), force: Some(true) };
    env.docker().disconnect_network(&env.network("repl"), req).await.map_err(|e| e.to_string())
}

/// Connects the primary to the replication network again, under its name there.
pub(crate) async fn rejoin_primary(env: &Environment, primary: &str) -> Result<(), String> {
    use testcontainers::bollard::models::{EndpointSettings, NetworkConnectRequest};
    let req = NetworkConnectRequest {
        container: primary.to_owned(),
        endpoint_config: Some(EndpointSettings {
            aliases: Some(crate::env::net_aliases("redis-primary", "repl")),
            ..Default::default()
        }),
    };
    env.docker().connect_network(&env.network("repl"), req).await.map_err(|e| e.to_string())
}

/// Deletes the lease key on the cut primary and waits (at most 3 s) for a node to acquire it
/// there; returns that holder.
async fn acquired_on_the_cut_primary(w: &World<'_>) -> Result<String, String> {
    let env = w.env;
    let before = env.redis_cli("redis-primary", &["GET", &w.lease.key()]).await.map_err(|e| e.to_string())?;
    env.redis_cli("redis-primary", &["DEL", &w.lease.key()]).await.map_err(|e| e.to_string())?;
    let asked = Instant::now();
    while asked.elapsed() < Duration::from_secs(3) {
        let now = env.redis_cli("redis-primary", &["GET", &w.lease.key()]).await.unwrap_or_default();
        let now = now.trim();
        if !now.is_empty() && now != before.trim() {
            return Ok(now.to_owned());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Err("no node acquired on the cut primary within 3 s of its key being deleted".into())
}

/// The probe of the loss: what the cut primary acknowledged is not on the new one.
async fn lease_lost(w: &World<'_>, first: &str, new_holder: &str) -> Result<String, String> {
    let old = w.env.redis_cli("redis-primary", &["GET", &w.lease.key()]).await.unwrap_or_default();
    let old = old.trim();
    if old.is_empty() || old == new_holder {
        return Err(format!(
            "the cut primary holds `{old}` and the new primary the same: no acknowledged lease was lost"
        ));
    }
    Ok(format!(
        "; the cut primary holds {old} (acknowledged there after the cut: {first} acquired first), the new primary \
         does not: that lease is lost"
    ))
}

/// Each node's Redis proxy follows the new primary at its own delay from the promotion, the
/// earliest first; says who followed when, and who stays behind.
async fn follow_promotion(w: &World<'_>, f: &Fault) -> Result<String, String> {
    let promoted = Instant::now();
    let mut followed: Vec<(String, u64)> = Vec::new();
    for (n, delay) in follow_delays(f, w.s.nodes.count) {
        tokio::time::sleep_until((promoted + Duration::from_millis(delay)).into()).await;
        w.proxy.set_upstream(&format!("{n}-redis"), "redis-replica:6379").await.map_err(|e| e.to_string())?;
        followed.push((n, promoted.elapsed().as_millis() as u64));
    }
    let uniform = f.follow_ms_by_node.as_ref().is_none_or(std::collections::BTreeMap::is_empty);
    let follow = if followed.is_empty() {
        "no node's Redis proxy follows it".to_owned()
    } else if uniform {
        let names: Vec<&str> = followed.iter().map(|(n, _)| n.as_str()).collect();
        format!("the Redis proxies of {} follow it after {} ms", names.join(", "), f.follow_ms.unwrap_or(0))
    } else {
        let each: Vec<String> = followed.iter().map(|(n, ms)| format!("{n} after {ms} ms")).collect();
        format!("the Redis proxies follow it each at its own delay: {}", each.join(", "))
    };
    let never = f.never_follow.clone().unwrap_or_default();
    let stale = match never.len() {
        0 => String::new(),
        1 => format!("; {} stays on the old primary", never[0]),
        _ => format!("; {} stay on the old primary", never.join(", ")),
    };
    Ok(format!("{follow}{stale}"))
}

pub(super) async fn heal_failover(w: &World<'_>, a: &Applied, settle: bool) -> Heal {
    let env = w.env;
    let Some(primary) = env.container("redis-primary") else { return Heal::done("no redis-primary container") };
    if a.fault.mode == Some(Mode::Manual) {
        // Nothing to undo, but Sentinel demotes the old primary itself, and at load 17
        // that took 11.5 s (7.5 s after a 4 s fault had healed): the role change then
        // fell outside the fault and read as drift. The heal lasts until it is done.
        return if settle {
            demoted(w).await
        } else {
            Heal::done("nothing to undo: Sentinel makes the old primary a replica itself")
        };
    }
    let back = if a.fault.mode == Some(Mode::Isolate) {
        rejoin_primary(env, primary).await
    } else {
        signal_primary(env, primary, "SIGCONT").await
    };
    match back {
        Ok(()) if settle => demoted(w).await,
        Ok(()) => Heal::done("the old primary is back (Sentinel demotes it to a replica within seconds)"),
        Err(e) => Heal::Failed(format!("bringing the old primary back failed: {e}")),
    }
}

/// Waits until Sentinel has demoted the old primary that came back: until then it answers as a
/// master beside the new one (split brain, ~11 s measured), and the fault is not over. The heal is
/// stamped when the topology is whole again, so the liveness bound counts from there. Bounded by
/// Sentinel's timings; a topology that never settles is said so (the environment drifted).
async fn demoted(w: &World<'_>) -> Heal {
    let began = Instant::now();
    let sentinel = &w.s.sentinel;
    let limit = Duration::from_millis(sentinel.down_after_ms + sentinel.failover_timeout_ms + 20_000);
    loop {
        let role = w.env.redis_cli("redis-primary", &["ROLE"]).await.unwrap_or_default();
        if role.starts_with("slave") {
            return Heal::Done(format!(
                "the old primary is back; Sentinel demoted it to a replica {} ms later",
                began.elapsed().as_millis()
            ));
        }
        if began.elapsed() > limit {
            return Heal::Unsettled(format!(
                "the old primary is back but still a master {} ms later (the topology did not settle)",
                limit.as_millis()
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The nodes whose Redis proxies follow a failover's new primary, with each one's delay (ms after
/// the promotion), earliest first: `follow_ms_by_node`, else `follow_ms`, else at once; never the
/// `never_follow` nodes.
pub(crate) fn follow_delays(f: &Fault, nodes: u32) -> Vec<(String, u64)> {
    let never = f.never_follow.clone().unwrap_or_default();
    let mut out: Vec<(String, u64)> = (1..=nodes)
        .map(|i| format!("n{i}"))
        .filter(|n| !never.contains(n))
        .map(|n| {
            let own = f.follow_ms_by_node.as_ref().and_then(|m| m.get(&n).copied());
            let delay = own.or(f.follow_ms).unwrap_or(0);
            (n, delay)
        })
        .collect();
    out.sort_by_key(|(n, d)| (*d, n.strip_prefix('n').and_then(|i| i.parse::<u32>().ok()).unwrap_or(0)));
    out
}

fn stop_signal(signal: &str) -> testcontainers::bollard::query_parameters::KillContainerOptions {
    testcontainers::bollard::query_parameters::KillContainerOptionsBuilder::new().signal(signal).build()
}
