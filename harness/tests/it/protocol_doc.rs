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
