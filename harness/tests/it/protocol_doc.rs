//! docs/node-protocol.md's examples are the protocol: every one parses as the harness's types,
//! and every command and event kind appears in the doc at least once.

use leasequake_reports::history::{NodeCommand, NodeEvent};

fn blocks(tag: &str) -> Vec<String> {
    let doc = include_str!("../../../docs/node-protocol.md");
    let fence = format!("```json {tag}\n");
    doc.split(&fence).skip(1).map(|rest| rest.split("```").next().unwrap_or("").trim().to_owned()).collect()
}

#[test]
fn every_example_in_the_protocol_doc_is_a_valid_message() {
    let commands = blocks("command");
    let events = blocks("event");
    assert!(commands.len() >= 6 && events.len() >= 19, "{} commands, {} events", commands.len(), events.len());
    let mut kinds = std::collections::BTreeSet::new();
    for c in &commands {
        let parsed: NodeCommand = serde_json::from_str(c).unwrap_or_else(|e| panic!("{c}: {e}"));
        kinds.insert(serde_json::to_value(&parsed).unwrap()["type"].as_str().unwrap().to_owned());
    }
    for e in &events {
        let parsed: NodeEvent = serde_json::from_str(e).unwrap_or_else(|err| panic!("{e}: {err}"));
        let back = serde_json::to_value(&parsed).unwrap();
        assert_eq!(back, serde_json::from_str::<serde_json::Value>(e).unwrap(), "round trip of {e}");
        kinds.insert(back["type"].as_str().unwrap().to_owned());
    }
    for kind in [
        "config",
        "start",
        "go",
        "stall_renewal",
        "slow_model",
        "stop",
        "hello",
        "acquire_attempt",
        "acquired",
        "acquire_timed_out",
        "renewed",
        "checkpoint_passed",
        "checkpoint_failed",
        "ownership_lost",
        "sync_point",
        "model_call",
        "store_call_sent",
        "store_call_acked",
        "store_call_rejected",
        "store_call_unknown",
        "round_aborted",
        "sync_finished",
        "released",
        "stopped",
        "error",
    ] {
        assert!(kinds.contains(kind), "docs/node-protocol.md has no example of `{kind}`");
    }
}

/// Every Redis key name, token rule, `store_call_sent.op` value and event field the harness reads,
/// taken from the code's own functions, constants and types, is in the doc: a node written from
/// the doc alone can know them.
#[test]
fn the_protocol_doc_names_every_key_token_rule_op_and_event_field_the_harness_reads() {
    use leasequake_reports::history::{fence_key, lease_key, token_problem, StoreOp, TOKEN_MAX_BYTES};
    let doc = include_str!("../../../docs/node-protocol.md");
    for key in [lease_key("<tenant>"), fence_key("<tenant>"), lease_key("t1")] {
        assert!(doc.contains(&format!("`{key}`")), "docs/node-protocol.md does not name the key {key}");
    }
    assert!(doc.contains(&format!("at most {TOKEN_MAX_BYTES} bytes")), "the token length rule");
    assert!(doc.contains("starts with the node's name and a slash"), "the token prefix rule");
    // The doc's examples keep the strictest rule (protocol 2's; every example is node n1's).
    for e in blocks("event") {
        let parsed: NodeEvent = serde_json::from_str(&e).unwrap();
        if let Some(t) = parsed.kind.token() {
            assert_eq!(token_problem("n1", t, 2), None, "{e}");
        }
    }
    for op in StoreOp::ALL {
        let wire = serde_json::to_value(op).unwrap();
        let wire = wire.as_str().unwrap();
        assert!(doc.contains(&format!("`{wire}`")), "docs/node-protocol.md does not list op `{wire}`");
    }
    for (kind, fields) in every_event_with_every_field() {
        let example = blocks("event")
            .into_iter()
            .find(|e| e.contains(&format!("\"type\":\"{kind}\"")))
            .unwrap_or_else(|| panic!("no example of {kind}"));
        for field in fields {
            assert!(example.contains(&format!("\"{field}\":")), "the example of {kind} lacks `{field}`: {example}");
        }
    }
}

/// Each event kind with every field it can carry, optional ones included: a struct literal names
/// every field (a new field does not compile until it is here), and the exhaustive match names
/// every kind (a new kind does not compile until it is counted).
fn every_event_with_every_field() -> Vec<(String, Vec<String>)> {
    use leasequake_reports::history::{EventKind as K, Renewals, StoreOp};
    let t = || "n1/1/0/x".to_owned();
    let s = || "x".to_owned();
    let all = [
        K::Hello { protocol: 3, implementation: s(), lease_key: Some(s()), renewals: Some(Renewals::Reported) },
        K::AcquireAttempt,
        K::Acquired { token: t(), fence: 1, sent_ns: Some(1) },
        K::AcquireTimedOut { reason: s() },
        K::Renewed { token: t(), sent_ns: Some(1) },
        K::OwnershipLost { token: t(), reason: s(), checkpoint: Some(1) },
        K::CheckpointPassed { token: t(), number: 1, decided_ns: Some(1) },
        K::CheckpointFailed { token: t(), number: 1, reason: s() },
        K::SyncPoint { token: t(), number: 1 },
        K::ModelCall { token: t(), batch: 0, ms: 1, decided_ns: Some(1) },
        K::StoreCallSent { token: t(), fence: 1, op: StoreOp::Upsert, call: 1, decided_ns: Some(1) },
        K::StoreCallAcked { token: t(), call: 1 },
        K::StoreCallRejected { token: t(), call: 1, reason: s() },
        K::StoreCallUnknown { token: t(), call: 1, detail: s() },
        K::RoundAborted { token: t(), lost: true, reason: s() },
        K::SyncFinished { token: t(), fence: 1, collection: s() },
        K::Released { token: t(), outcome: s() },
        K::Stopped,
        K::Error { message: s() },
    ];
    // 19: the arms below; a new kind stops the match compiling, and until it is in `all` the
    // count of distinct kinds falls short.
    let counted = |k: &K| match k {
        K::Hello { .. }
        | K::AcquireAttempt
        | K::Acquired { .. }
        | K::AcquireTimedOut { .. }
        | K::Renewed { .. }
        | K::OwnershipLost { .. }
        | K::CheckpointPassed { .. }
        | K::CheckpointFailed { .. }
        | K::SyncPoint { .. }
        | K::ModelCall { .. }
        | K::StoreCallSent { .. }
        | K::StoreCallAcked { .. }
        | K::StoreCallRejected { .. }
        | K::StoreCallUnknown { .. }
        | K::RoundAborted { .. }
        | K::SyncFinished { .. }
        | K::Released { .. }
        | K::Stopped
        | K::Error { .. } => 1,
    };
    let distinct: std::collections::HashSet<_> = all.iter().map(std::mem::discriminant).collect();
    assert_eq!((all.iter().map(counted).sum::<usize>(), distinct.len()), (19, 19), "every kind once");
    all.into_iter()
        .map(|k| {
            let v = serde_json::to_value(NodeEvent { mono_ns: 1, round: 1, kind: k }).unwrap();
            let kind = v["type"].as_str().unwrap().to_owned();
            let fields = v.as_object().unwrap().keys().filter(|f| *f != "type").cloned().collect();
            (kind, fields)
        })
        .collect()
}

/// docs/trust.md names a test for every case it lists: each named test exists, as a `fn` in the
/// crate the row names, so a rename or a removal cannot leave the table pointing at nothing.
#[test]
fn every_test_docs_trust_names_exists() {
    let doc = include_str!("../../../docs/trust.md");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut sources = String::new();
    let mut dirs = vec![root.join("harness"), root.join("reports"), root.join("toxiproxy")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() && !p.ends_with("target") {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                sources.push_str(&std::fs::read_to_string(&p).unwrap());
            }
        }
    }
    // The last column of each row: `crate module::path::name`, comma-separated.
    let names: Vec<&str> = doc
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| Case"))
        .filter_map(|l| l.trim_end_matches('|').rsplit(" | ").next())
        .flat_map(|cell| cell.split('`').skip(1).step_by(2))
        .filter_map(|t| t.rsplit("::").next())
        .collect();
    assert!(names.len() >= 20, "the table names {} tests", names.len());
    for name in names {
        assert!(sources.contains(&format!("fn {name}(")), "docs/trust.md names a test `{name}` that no source holds");
    }
}
