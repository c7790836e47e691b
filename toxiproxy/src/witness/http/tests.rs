use leasequake_reports::wire::WireRequest;

use super::{request, response};
use crate::witness::resp::Frame;

#[test]
fn a_request_keeps_method_path_and_the_leases_fields_only() {
    let body = r#"{"tenant":"t","node":"n1","token":"n1/1/0/ab","fence":7,"call":3,"points":[1,2,3],"secret":"x"}"#;
    let wire = format!(
        "POST /v1/upsert?x=1 HTTP/1.1\r\nHost: s\r\nContent-Length: {}\r\nAuthorization: Bearer zz\r\n\r\n{body}",
        body.len()
    );
    let want = WireRequest::Http {
        method: "POST".into(),
        path: "/v1/upsert".into(),
        token: Some("n1/1/0/ab".into()),
        fence: Some(7),
        call: Some(3),
        batch: None,
    };
    assert_eq!(request(wire.as_bytes()), Frame::Done(want, wire.len()));
    for cut in 0..wire.len() {
        assert_eq!(request(&wire.as_bytes()[..cut]), Frame::Partial, "cut at {cut}");
    }
}

#[test]
fn a_body_that_is_not_json_still_frames_the_request() {
    let wire = b"POST /v1/embed HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc";
    assert!(matches!(request(wire), Frame::Done(WireRequest::Http { token: None, .. }, n) if n == wire.len()));
    let chunked = b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
    assert!(matches!(request(chunked), Frame::Done(_, n) if n == chunked.len()));
    assert!(matches!(request(b"POST /x HTTP/1.1\r\nContent-Length: -1\r\n\r\n"), Frame::Bad(_)));
}

#[test]
fn responses_are_framed_by_length_chunks_or_the_close() {
    let sized = b"HTTP/1.1 409 Conflict\r\ncontent-length: 2\r\n\r\n{}";
    assert_eq!(response(sized), Frame::Done((Some(409), false), sized.len()));
    assert_eq!(response(&sized[..sized.len() - 1]), Frame::Partial);
    let chunked = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n";
    assert_eq!(response(chunked), Frame::Done((Some(200), false), chunked.len()));
    let to_close = b"HTTP/1.0 200 OK\r\n\r\nbody";
    assert_eq!(response(to_close), Frame::Done((Some(200), true), 19));
    assert_eq!(response(b"HTTP/1.1 100 Continue\r\n\r\n"), Frame::Done((None, false), 25));
    assert!(matches!(response(b"HTTP/1.1 abc\r\n\r\n"), Frame::Bad(_)));
}
