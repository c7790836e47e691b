use leasequake_reports::wire::{Resp, WireReply, WireRequest};
use serde_json::Value;

use super::Log;

fn records(log: &Log) -> Vec<Value> {
    log.page(0, 100)["records"].as_array().cloned().unwrap_or_default()
}

#[test]
fn commands_pair_with_their_replies_in_order_and_carry_their_stamps() {
    let log = Log::new(Default::default());
    let conn = log.conn("n1-redis");
    let mut c = conn.lock().unwrap();
    c.sent(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*2\r\n$3\r\nDEL", 100, true);
    c.sent(b"\r\n$1\r\nk\r\n", 105, true);
    c.answered(b"$1\r\nv\r\n:", Some(200));
    c.answered(b"1\r\n", Some(210));
    let r = records(&log);
    assert_eq!(r.len(), 2);
    assert_eq!(
        (r[0]["seq"].as_u64(), r[0]["sent_ns"].as_u64(), r[0]["reply_ns"].as_u64()),
        (Some(1), Some(100), Some(200))
    );
    // The second command began in the first chunk: it was sent when that chunk was read.
    assert_eq!((r[1]["sent_ns"].as_u64(), r[1]["reply_ns"].as_u64()), (Some(100), Some(210)));
    let reply: WireReply = serde_json::from_value(r[1]["reply"].clone()).unwrap();
    assert_eq!(reply, WireReply::Redis(Resp::Int(1)));
}

#[test]
fn secrets_are_never_recorded_and_lease_commands_are() {
    let log = Log::new(Default::default());
    let conn = log.conn("n1-redis");
    let mut c = conn.lock().unwrap();
    c.sent(b"*2\r\n$4\r\nAUTH\r\n$6\r\nhunter\r\n*5\r\n$5\r\nHELLO\r\n$1\r\n3\r\n$4\r\nAUTH\r\n$1\r\nu\r\n$6\r\nhunter\r\n", 1, true);
    c.sent(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\ntok\r\n", 2, true);
    let text = serde_json::to_string(&log.page(0, 10)).unwrap();
    assert!(!text.contains("hunter"), "{text}");
    let r = records(&log);
    let args = |i: usize| serde_json::from_value::<WireRequest>(r[i]["request"].clone()).unwrap();
    assert_eq!(args(0), WireRequest::Redis { args: vec!["AUTH".into()] });
    assert_eq!(args(2), WireRequest::Redis { args: vec!["SET".into(), "k".into(), "tok".into()] });
}

#[test]
fn a_dropped_reply_is_recorded_as_answered_but_not_delivered() {
    let log = Log::new(Default::default());
    let conn = log.conn("n1-redis");
    let mut c = conn.lock().unwrap();
    c.sent(b"*1\r\n$4\r\nPING\r\n", 1, true);
    c.answered(b"+PONG\r\n", None);
    let r = records(&log);
    assert!(r[0]["reply"].is_object() && r[0].get("reply_ns").is_none(), "{r:?}");
}

#[test]
fn unreadable_bytes_end_recording_with_one_record_saying_why() {
    let log = Log::new(Default::default());
    let conn = log.conn("n1-redis");
    let mut c = conn.lock().unwrap();
    c.sent(b"*x\r\n", 1, true);
    c.sent(b"*1\r\n$4\r\nPING\r\n", 2, true);
    let r = records(&log);
    assert_eq!(r.len(), 1);
    assert!(r[0]["request"]["unreadable"]["why"].as_str().is_some(), "{r:?}");
}

#[test]
fn http_requests_pair_with_their_statuses() {
    let log = Log::new(Default::default());
    let conn = log.conn("n1-store");
    let mut c = conn.lock().unwrap();
    c.sent(b"POST /v1/record HTTP/1.1\r\ncontent-length: 13\r\n\r\n{\"fence\": 42}", 5, true);
    c.answered(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n", Some(9));
    let r = records(&log);
    assert_eq!(r[0]["request"]["http"]["fence"].as_u64(), Some(42));
    assert_eq!(r[0]["reply"]["http"]["status"].as_u64(), Some(200));
}

#[test]
fn the_log_is_bounded_and_counts_what_it_dropped() {
    let log = Log::new(Default::default());
    let conn = log.conn("n1-redis");
    let mut c = conn.lock().unwrap();
    let n = super::RECORDS_MAX + 3;
    for i in 0..n {
        c.sent(b"*1\r\n$4\r\nPING\r\n", i as u64, true);
    }
    let page = log.page(0, 1);
    assert_eq!(
        (page["first"].as_u64(), page["lost"].as_u64(), page["next"].as_u64()),
        (Some(4), Some(3), Some(n as u64 + 1))
    );
    assert_eq!(page["records"][0]["seq"].as_u64(), Some(4));
    let later = log.page(n as u64 - 1, 10);
    assert_eq!(later["records"].as_array().map(Vec::len), Some(1));
}
