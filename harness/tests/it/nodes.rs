//! Nodes as real processes against a real Redis and a real store: turns, sync points, SIGSTOP
//! with and without fencing, garbage on stdout, and a node outliving its parent.

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use leasequake::local_redis::LocalRedis;
use leasequake::store::{self, Store};
use leasequake::supervisor::{NodeProcess, Received};
use leasequake_reports::history::{
    AuditRecord, EventKind, FenceSource, LeaseTimings, NodeCommand, NodeConfig, PipelineShape, StoreOp, StorePolicy,
};
use rustix::process::Signal;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

struct Bench {
    redis: LocalRedis,
    store: Arc<Store>,
    store_addr: String,
    cancel: CancellationToken,
    events: mpsc::Receiver<Received>,
    tx: mpsc::Sender<Received>,
    history: Vec<Received>,
}

impl Bench {
    async fn start(policy: StorePolicy) -> Self {
        let redis = LocalRedis::start().await.unwrap();
        let store = Arc::new(Store::new(policy, None).unwrap());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let store_addr = listener.local_addr().unwrap().to_string();
        let cancel = CancellationToken::new();
        tokio::spawn(store::serve(listener, store.clone(), cancel.clone()));
        let (tx, events) = mpsc::channel(65_536);
        Self { redis, store, store_addr, cancel, events, tx, history: Vec::new() }
    }

    fn config(&self, node: &str, sync_points: Vec<u8>) -> NodeConfig {
        NodeConfig {
            protocol: leasequake_reports::history::PROTOCOL_VERSION_MIN,
            protocol_max: Some(leasequake_reports::history::PROTOCOL_VERSION),
            node: node.into(),
            incarnation: 1,
            tenant: "t1".into(),
            redis_url: self.redis.url(),
            store_addr: self.store_addr.clone(),
            model_addr: Some(self.store_addr.clone()),
            lease: LeaseTimings { ttl_ms: 1500, renew_ms: 500, acquire_wait_ms: 400, command_timeout_ms: 100 },
            pipeline: PipelineShape {
                batches: 2,
                batch_size: 8,
                embed_ms: 20,
                prepare_ms: 10,
                checkpoints: vec![1, 2, 3, 4, 5, 6, 7],
                sync_points,
                pause_ms: 30,
                store_timeout_ms: 2000,
            },
            fence_source: FenceSource::Redis,
            seed: 1,
        }
    }

    fn spawn(&self, config: NodeConfig) -> NodeProcess {
        let cmd = vec![env!("CARGO_BIN_EXE_leasequake").to_owned(), "node".to_owned()];
        NodeProcess::spawn(&cmd, config, self.tx.clone(), Stdio::null()).unwrap()
    }

    /// Waits (at most `limit`) for an event of `node` matching `pred`; keeps every event.
    async fn wait_for(&mut self, node: &str, limit: Duration, pred: impl Fn(&EventKind) -> bool) -> EventKind {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let got = tokio::time::timeout_at(deadline, self.events.recv()).await;
            let r = got.unwrap_or_else(|_| panic!("{node}: no matching event within {limit:?}")).unwrap();
            self.history.push(r.clone());
            if let (true, Ok(e)) = (r.node == node, &r.line) {
                if pred(&e.kind) {
                    return e.kind.clone();
                }
            }
        }
    }

    fn drain(&mut self) {
        while let Ok(r) = self.events.try_recv() {
            self.history.push(r);
        }
    }

    fn audit(&self) -> Vec<AuditRecord> {
        self.store.audit_after(0)
    }
}

impl Drop for Bench {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// Every store call a node saw acknowledged is an accepted audit record, and the audit is gap-free.
fn assert_audit_accounts_for_every_ack(history: &[Received], audit: &[AuditRecord]) {
    assert!(audit.iter().enumerate().all(|(i, r)| r.seq == i as u64 + 1), "arrival sequence has a gap");
    let unaccounted = leasequake::demo::Tally::of(history, audit).unaccounted;
    assert!(unaccounted.is_empty(), "acked but not in the audit log: {unaccounted:?}");
}

#[tokio::test]
async fn two_nodes_take_turns_and_both_finish_syncs() {
    let mut b = Bench::start(StorePolicy::Enforce).await;
    let n1 = b.spawn(b.config("n1", vec![]));
    let n2 = b.spawn(b.config("n2", vec![]));
    for n in [&n1, &n2] {
        n.send(NodeCommand::Start).unwrap();
    }
    let finished = |e: &EventKind| matches!(e, EventKind::SyncFinished { .. });
    b.wait_for("n1", Duration::from_secs(20), finished).await;
    b.wait_for("n2", Duration::from_secs(20), finished).await;
    assert!(n1.stop(Duration::from_secs(5)).await && n2.stop(Duration::from_secs(5)).await, "nodes stop on request");
    b.drain();
    let audit = b.audit();
    assert_audit_accounts_for_every_ack(&b.history, &audit);
    let fences: Vec<u64> = audit.iter().filter(|a| a.op == StoreOp::SwitchAlias).map(|a| a.fence).collect();
    assert!(fences.windows(2).all(|w| w[0] < w[1]), "alias switches under rising fences: {fences:?}");
    assert!(b.history.iter().all(|r| r.line.is_ok()), "the reference node speaks only protocol lines");
}

#[tokio::test]
async fn a_sync_point_holds_the_node_until_go() {
    let mut b = Bench::start(StorePolicy::Enforce).await;
    let n1 = b.spawn(b.config("n1", vec![7]));
    n1.send(NodeCommand::Start).unwrap();
    b.wait_for("n1", Duration::from_secs(10), |e| matches!(e, EventKind::SyncPoint { number: 7, .. })).await;
    // Held: the node has committed to its persist (reported it sent, before the sync point), but
    // the store receives nothing while it waits.
    tokio::time::sleep(Duration::from_millis(300)).await;
    b.drain();
    let sent = |h: &[Received]| {
        h.iter().position(|r| matches!(&r.line, Ok(e) if matches!(e.kind, EventKind::StoreCallSent { op: StoreOp::PersistRecord, .. })))
    };
    let held = b.history.iter().position(|r| matches!(&r.line, Ok(e) if matches!(e.kind, EventKind::SyncPoint { .. })));
    let sent = sent(&b.history);
    assert!(matches!((sent, held), (Some(s), Some(h)) if s < h), "store_call_sent, then sync_point");
    let persisted = |b: &Bench| b.audit().iter().filter(|a| a.op == StoreOp::PersistRecord).count();
    assert_eq!(persisted(&b), 0, "nothing reaches the store while the node holds");
    n1.send(NodeCommand::Go { checkpoint: 7 }).unwrap();
    b.wait_for("n1", Duration::from_secs(5), |e| matches!(e, EventKind::SyncFinished { .. })).await;
    assert_eq!(persisted(&b), 1);
    n1.kill().await;
}

/// n1 is frozen (SIGSTOP) right after passing checkpoint 7; n2 takes over and syncs; n1 resumes
/// and sends its persist under the old fence. Returns n1's persist audit record and n2's fence.
async fn frozen_owner_writes_late(policy: StorePolicy) -> (AuditRecord, u64, Vec<AuditRecord>) {
    let mut b = Bench::start(policy).await;
    let n1 = b.spawn(b.config("n1", vec![7]));
    n1.send(NodeCommand::Start).unwrap();
    b.wait_for("n1", Duration::from_secs(10), |e| matches!(e, EventKind::SyncPoint { number: 7, .. })).await;
    n1.signal(Signal::STOP).unwrap();
    n1.send(NodeCommand::Go { checkpoint: 7 }).unwrap(); // waits in the pipe while n1 is frozen
    let n2 = b.spawn(b.config("n2", vec![]));
    n2.send(NodeCommand::Start).unwrap();
    let acquired = b.wait_for("n2", Duration::from_secs(15), |e| matches!(e, EventKind::Acquired { .. })).await;
    let EventKind::Acquired { fence: n2_fence, .. } = acquired else { unreachable!() };
    b.wait_for("n2", Duration::from_secs(15), |e| matches!(e, EventKind::SyncFinished { .. })).await;
    n1.signal(Signal::CONT).unwrap();
    let persist_answered =
        |e: &EventKind| matches!(e, EventKind::StoreCallAcked { .. } | EventKind::StoreCallRejected { .. });
    b.wait_for("n1", Duration::from_secs(10), persist_answered).await;
    n1.kill().await;
    n2.kill().await;
    b.drain();
    let audit = b.audit();
    assert_audit_accounts_for_every_ack(&b.history, &audit);
    let late = audit.iter().find(|a| a.node == "n1" && a.op == StoreOp::PersistRecord).cloned().unwrap();
    (late, n2_fence, audit)
}

#[tokio::test]
async fn a_frozen_owners_late_write_is_rejected_when_the_store_enforces_fences() {
    let (late, n2_fence, _) = frozen_owner_writes_late(StorePolicy::Enforce).await;
    assert!(late.fence < n2_fence);
    assert!(!late.accepted, "{late:?}");
    assert!(late.reason.as_deref().unwrap_or("").contains("stale fence"), "{late:?}");
}

#[tokio::test]
async fn a_frozen_owners_late_write_lands_when_the_store_only_observes() {
    let (late, n2_fence, audit) = frozen_owner_writes_late(StorePolicy::Observe).await;
    assert!(late.fence < n2_fence);
    assert!(late.accepted, "{late:?}");
    let newer = audit.iter().find(|a| a.node == "n2" && a.accepted).unwrap();
    assert!(newer.seq < late.seq, "the stale write landed after the newer owner's: the hazard, shown");
}

#[tokio::test]
async fn a_malformed_node_line_is_reported_not_crashed_into() {
    let (tx, mut rx) = mpsc::channel(16);
    let script = r#"read cfg; echo 'this is not json'; echo '{"mono_ns":1,"round":0,"type":"stopped"}'"#;
    let cmd = ["sh", "-c", script].map(str::to_owned);
    let b = Bench::start(StorePolicy::Enforce).await;
    let n = NodeProcess::spawn(&cmd, b.config("x", vec![]), tx, Stdio::null()).unwrap();
    let first = rx.recv().await.unwrap();
    let garbage = first.line.unwrap_err();
    assert_eq!(garbage.raw, "this is not json");
    let second = rx.recv().await.unwrap();
    assert!(matches!(second.line.unwrap().kind, EventKind::Stopped));
    n.kill().await;
}

#[tokio::test]
async fn a_node_exits_when_its_parent_goes_away() {
    use std::io::{BufRead, Write};
    let b = Bench::start(StorePolicy::Enforce).await;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_leasequake"))
        .arg("node")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let config = NodeCommand::Config(Box::new(b.config("n1", vec![])));
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{}", serde_json::to_string(&config).unwrap()).unwrap();
    writeln!(stdin, "{}", serde_json::to_string(&NodeCommand::Start).unwrap()).unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut hello = String::new();
    out.read_line(&mut hello).unwrap();
    assert!(hello.contains("\"hello\""), "{hello}");
    drop(stdin); // what the parent's death does to the pipe
    let exited = tokio::task::spawn_blocking(move || {
        for _ in 0..100 {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        None
    })
    .await
    .unwrap();
    assert!(exited.is_some_and(|s| s.success()), "the node did not exit within 5 s of losing its parent");
}

fn python_node() -> Vec<String> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let python = root.join("target/python-node-venv/bin/python");
    assert!(python.is_file(), "{} is missing: run scripts/deps (it creates the venv with redis-py)", python.display());
    vec![python.display().to_string(), root.join("harness/tests/python-node/node.py").display().to_string()]
}

/// The Python node on redis-py's `redis.lock.Lock` (docs/libraries.md), from the venv scripts/deps
/// makes (the same redis-py major version as nodes/redis-py-lock pins).
fn redis_py_lock_node() -> Vec<String> {
    let mut cmd = python_node();
    cmd.extend(["--lock".to_owned(), "redis-py".to_owned()]);
    cmd
}

fn reference_node() -> Vec<String> {
    vec![env!("CARGO_BIN_EXE_leasequake").to_owned(), "node".to_owned()]
}

/// The doc's example commands, with this bench's addresses.
fn doc_commands(b: &Bench) -> Vec<NodeCommand> {
    let doc = include_str!("../../../docs/node-protocol.md");
    doc.split("```json command\n")
        .skip(1)
        .map(|rest| rest.split("```").next().unwrap_or("").trim())
        .map(|line| match serde_json::from_str::<NodeCommand>(line).unwrap() {
            NodeCommand::Config(mut c) => {
                c.redis_url = b.redis.url();
                c.store_addr = b.store_addr.clone();
                c.model_addr = c.model_addr.map(|_| b.store_addr.clone());
                NodeCommand::Config(c)
            }
            other => other,
        })
        .collect()
}

/// Feeds a node the doc's config, start and (at its sync point) go and stop; returns the event
/// types it answered with, in order.
async fn answers_to_the_doc_examples(command: Vec<String>) -> Vec<String> {
    let mut b = Bench::start(StorePolicy::Enforce).await;
    let cmds = doc_commands(&b);
    let by_type = |t: &str| cmds.iter().find(|c| serde_json::to_value(c).unwrap()["type"] == t).cloned().unwrap();
    let NodeCommand::Config(config) = by_type("config") else { unreachable!() };
    let n = NodeProcess::spawn(&command, *config, b.tx.clone(), Stdio::null()).unwrap();
    n.send(by_type("start")).unwrap();
    b.wait_for("n1", Duration::from_secs(20), |e| matches!(e, EventKind::SyncPoint { number: 7, .. })).await;
    n.send(by_type("go")).unwrap();
    b.wait_for("n1", Duration::from_secs(10), |e| matches!(e, EventKind::Released { .. })).await;
    n.send(by_type("stop")).unwrap();
    b.wait_for("n1", Duration::from_secs(10), |e| matches!(e, EventKind::Stopped)).await;
    n.kill().await;
    assert!(b.history.iter().all(|r| r.line.is_ok()), "garbage from {command:?}: {:?}", b.history);
    assert_audit_accounts_for_every_ack(&b.history, &b.audit());
    // Protocol 4: each model call was a call to the model service.
    let calls =
        b.history.iter().filter(|r| matches!(&r.line, Ok(e) if matches!(e.kind, EventKind::ModelCall { .. }))).count();
    let served = b.store.model().audit_after(0).iter().filter(|r| r.finished_ns.is_some()).count();
    assert!(calls > 0 && calls == served, "{command:?}: {calls} model_call events, {served} answered by the service");
    b.history
        .iter()
        .filter_map(|r| r.line.as_ref().ok())
        .map(|e| serde_json::to_value(e).unwrap()["type"].as_str().unwrap().to_owned())
        .filter(|t| t != "renewed") // timing-dependent
        .collect()
}

#[tokio::test]
async fn the_doc_examples_get_the_same_answers_from_the_reference_and_the_python_node() {
    let reference = answers_to_the_doc_examples(reference_node()).await;
    let python = answers_to_the_doc_examples(python_node()).await;
    let library = answers_to_the_doc_examples(redis_py_lock_node()).await;
    assert_eq!(reference.first().map(String::as_str), Some("hello"));
    assert!(reference.contains(&"sync_finished".to_owned()), "{reference:?}");
    assert_eq!(reference, python, "the two implementations answered the same commands differently");
    assert_eq!(reference, library, "the node on redis-py's Lock answered differently");
}

#[tokio::test]
async fn a_python_node_and_the_reference_node_take_turns() {
    take_turns(python_node()).await;
}

/// redis-py's Lock and the reference lease exclude each other on one key: the library takes the
/// protocol's key and tokens, so either can hold the lease and the other waits.
#[tokio::test]
async fn a_node_on_redis_py_s_lock_and_the_reference_node_take_turns() {
    take_turns(redis_py_lock_node()).await;
}

async fn take_turns(python: Vec<String>) {
    let mut b = Bench::start(StorePolicy::Enforce).await;
    let rust = NodeProcess::spawn(&reference_node(), b.config("rs", vec![]), b.tx.clone(), Stdio::null()).unwrap();
    let py = NodeProcess::spawn(&python, b.config("py", vec![]), b.tx.clone(), Stdio::null()).unwrap();
    for n in [&rust, &py] {
        n.send(NodeCommand::Start).unwrap();
    }
    let finished = |e: &EventKind| matches!(e, EventKind::SyncFinished { .. });
    b.wait_for("py", Duration::from_secs(30), finished).await;
    b.wait_for("rs", Duration::from_secs(30), finished).await;
    assert!(py.stop(Duration::from_secs(5)).await, "the python node stops on request");
    rust.stop(Duration::from_secs(5)).await;
    b.drain();
    assert!(b.history.iter().all(|r| r.line.is_ok()), "garbage: {:?}", b.history.iter().find(|r| r.line.is_err()));
    assert_audit_accounts_for_every_ack(&b.history, &b.audit());
    let fences: Vec<u64> =
        b.audit().iter().filter(|a| a.op == StoreOp::SwitchAlias && a.accepted).map(|a| a.fence).collect();
    assert!(fences.windows(2).all(|w| w[0] < w[1]), "{fences:?}");
}

#[tokio::test]
async fn a_stalled_renewal_thread_makes_the_node_stop_its_round_before_writing() {
    // The production incident: renewal pauses while the pipeline runs on.
    let mut b = Bench::start(StorePolicy::Enforce).await;
    let n1 = b.spawn(b.config("n1", vec![1]));
    n1.send(NodeCommand::Start).unwrap();
    let at = b.wait_for("n1", Duration::from_secs(10), |e| matches!(e, EventKind::SyncPoint { number: 1, .. })).await;
    let EventKind::SyncPoint { token, .. } = at else { unreachable!() };
    n1.send(NodeCommand::StallRenewal { ms: 4000 }).unwrap();
    // Let the lease's validity (ttl 1500 ms) run out with renewal frozen: the duration under test.
    tokio::time::sleep(Duration::from_millis(2000)).await;
    n1.send(NodeCommand::Go { checkpoint: 1 }).unwrap();
    let aborted = b.wait_for("n1", Duration::from_secs(10), |e| matches!(e, EventKind::RoundAborted { .. })).await;
    assert!(matches!(&aborted, EventKind::RoundAborted { lost: true, token: t, .. } if *t == token), "{aborted:?}");
    n1.kill().await;
    b.drain();
    let lost = b.history.iter().filter_map(|r| r.line.as_ref().ok()).find_map(|e| match &e.kind {
        EventKind::OwnershipLost { token: t, reason, .. } if *t == token => Some(reason.clone()),
        _ => None,
    });
    assert_eq!(lost.as_deref(), Some("expired"), "the node's own deadline caught it, not Redis");
    let writes = b.audit().iter().filter(|a| a.token == token && a.op.is_write()).count();
    assert_eq!(writes, 0, "no store write under the expired lease");
}
