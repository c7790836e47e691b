use leasequake_reports::wire::Resp;

use super::{command, reply, Frame};

#[test]
fn a_command_is_read_once_whole_and_waits_when_cut_anywhere() {
    let wire = b"*3\r\n$3\r\nGET\r\n$3\r\nkey\r\n$0\r\n\r\n";
    let whole = vec![b"GET".to_vec(), b"key".to_vec(), Vec::new()];
    assert_eq!(command(wire), Frame::Done(whole, wire.len()));
    for cut in 0..wire.len() {
        assert_eq!(command(&wire[..cut]), Frame::Partial, "cut at {cut}");
    }
    let mut two = wire.to_vec();
    two.extend_from_slice(b"*1\r\n$4\r\nPING\r\n");
    assert!(matches!(command(&two), Frame::Done(_, n) if n == wire.len()));
}

#[test]
fn inline_commands_and_bad_bytes_are_told_apart() {
    assert_eq!(command(b"PING  x\r\n"), Frame::Done(vec![b"PING".to_vec(), b"x".to_vec()], 9));
    assert!(matches!(command(b"*x\r\n"), Frame::Bad(_)));
    assert!(matches!(command(b"*2\r\n:1\r\n"), Frame::Bad(_)));
    assert!(matches!(command(b"*1\r\n$-5\r\n"), Frame::Bad(_)));
    assert!(matches!(command(b"*9999999999\r\n"), Frame::Bad(_)));
    // A length that would overflow is refused, never wrapped.
    assert!(matches!(command(b"*1\r\n$18446744073709551615\r\n"), Frame::Bad(_)));
}

#[test]
fn replies_of_every_type_are_read() {
    let cases: [(&[u8], Resp); 9] = [
        (b"+OK\r\n", Resp::Simple("OK".into())),
        (b"-ERR no\r\n", Resp::Error("ERR no".into())),
        (b":-7\r\n", Resp::Int(-7)),
        (b"$3\r\nabc\r\n", Resp::Bulk(Some("abc".into()))),
        (b"$-1\r\n", Resp::Bulk(None)),
        (b"_\r\n", Resp::Bulk(None)),
        (b"*2\r\n:1\r\n:7\r\n", Resp::Array(Some(vec![Resp::Int(1), Resp::Int(7)]))),
        (b"*-1\r\n", Resp::Array(None)),
        (b"%1\r\n+a\r\n:1\r\n", Resp::Array(Some(vec![Resp::Simple("a".into()), Resp::Int(1)]))),
    ];
    for (wire, want) in cases {
        assert_eq!(reply(wire), Frame::Done(Some(want), wire.len()), "{}", String::from_utf8_lossy(wire));
        for cut in 0..wire.len() {
            assert_eq!(reply(&wire[..cut]), Frame::Partial, "{} cut at {cut}", String::from_utf8_lossy(wire));
        }
    }
}

#[test]
fn pushes_answer_nothing_and_attributes_describe_the_reply_after_them() {
    assert_eq!(reply(b">2\r\n+message\r\n+x\r\n"), Frame::Done(None, 18));
    let attributed = b"|1\r\n+ttl\r\n:3\r\n:1\r\n";
    assert_eq!(reply(attributed), Frame::Done(Some(Resp::Int(1)), attributed.len()));
}

#[test]
fn deep_or_huge_replies_are_refused() {
    let deep = "*1\r\n".repeat(20) + ":1\r\n";
    assert!(matches!(reply(deep.as_bytes()), Frame::Bad(_)));
    assert!(matches!(reply(b"$99999999999999999999\r\n"), Frame::Bad(_)));
    assert!(matches!(reply(b"?\r\n"), Frame::Bad(_)));
}
