//! The witness against a real redis-server: every command a client sends through a proxy is
//! recorded with its reply, stamped on CLOCK_MONOTONIC before the toxics (send) and after them
//! (delivery), and a reply a toxic drops is recorded as answered but never delivered.

use std::time::Duration;

use leasequake_reports::wire::{Resp, WireReply, WireRequest};
use leasequake_toxiproxy::witness::mono_ns;
use leasequake_toxiproxy::{Stream, ToxicSpec};
use tokio::net::TcpStream;

use crate::support::{command, read_within, ReadEnd, Redis, Server};

#[tokio::test]
async fn commands_and_replies_are_recorded_with_stamps_around_the_toxics() {
    let redis = Redis::start().await;
    let server = Server::start().await;
    let p = server.client.create_proxy("n1-redis", "127.0.0.1:0", &redis.addr.to_string()).await.unwrap();
    server.client.add_toxic("n1-redis", &ToxicSpec::latency(Stream::Downstream, 150, 0)).await.unwrap();
    let mut s = TcpStream::connect(&p.listen).await.unwrap();
    let before = mono_ns();
    let reply = command(&mut s, &["SET", "lease", "n1/1/0/ab", "NX", "PX", "1500"]).await;
    let after = mono_ns();
    assert_eq!(reply, b"+OK\r\n");
    command(&mut s, &["AUTH", "secret-pw"]).await;
    let page = server.client.witness("n1-redis", 0).await.unwrap().expect("our proxy has a witness");
    assert_eq!((page.first, page.next, page.lost), (1, 3, 0));
    let set = &page.records[0];
    let args = ["SET", "lease", "n1/1/0/ab", "NX", "PX", "1500"].map(str::to_owned).to_vec();
    assert_eq!(set.request, WireRequest::Redis { args });
    assert_eq!(set.reply, Some(WireReply::Redis(Resp::Simple("OK".into()))));
    let (sent, delivered) = (set.sent_ns, set.reply_ns.unwrap());
    assert!(before <= sent && delivered <= after, "{before} <= {sent} .. {delivered} <= {after}");
    assert!(delivered - sent >= 150_000_000, "the reply was delivered after the latency: {} ns", delivered - sent);
    assert_eq!((set.link.as_str(), set.node(), set.link_kind()), ("n1-redis", "n1", "redis"));
    assert_eq!(page.records[1].request, WireRequest::Redis { args: vec!["AUTH".into()] }, "no password kept");
    server.stop().await;
}

#[tokio::test]
async fn a_reply_a_blackhole_swallows_is_answered_but_not_delivered() {
    let redis = Redis::start().await;
    let server = Server::start().await;
    let p = server.client.create_proxy("n1-redis", "127.0.0.1:0", &redis.addr.to_string()).await.unwrap();
    let mut s = TcpStream::connect(&p.listen).await.unwrap();
    assert_eq!(command(&mut s, &["SET", "k", "v"]).await, b"+OK\r\n");
    server.client.add_toxic("n1-redis", &ToxicSpec::timeout(Stream::Downstream, 0)).await.unwrap();
    use tokio::io::AsyncWriteExt;
    s.write_all(b"*2\r\n$3\r\nDEL\r\n$1\r\nk\r\n").await.unwrap();
    assert_eq!(read_within(&mut s, Duration::from_millis(300)).await, ReadEnd::Nothing);
    // The DEL ran (Redis answered 1); the witness saw the answer go nowhere.
    let page = server.client.witness("n1-redis", 1).await.unwrap().unwrap();
    assert_eq!(page.records.len(), 1);
    assert_eq!(page.records[0].reply, Some(WireReply::Redis(Resp::Int(1))));
    assert_eq!(page.records[0].reply_ns, None);
    server.stop().await;
}

#[tokio::test]
async fn an_unknown_proxy_is_an_error_and_paging_follows_after() {
    let server = Server::start().await;
    let err = server.client.witness("nope", 0).await.unwrap_err();
    assert!(err.to_string().contains("404"), "{err}");
    let (status, body) = server.client.request("GET", "/proxies/nope/witness?after=x", None).await.unwrap();
    assert!(status == 400 || status == 404, "{status} {body}");
    server.stop().await;
}

const RENEW: &str =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0";

#[tokio::test]
async fn a_hold_keeps_back_a_keys_renewals_and_what_follows_them_until_removed() {
    let redis = Redis::start().await;
    let server = Server::start().await;
    let p = server.client.create_proxy("n1-redis", "127.0.0.1:0", &redis.addr.to_string()).await.unwrap();
    let mut s = TcpStream::connect(&p.listen).await.unwrap();
    assert_eq!(command(&mut s, &["SET", "lease", "tok", "NX", "PX", "60000"]).await, b"+OK\r\n");
    let hold =
        serde_json::json!({"name": "stall", "type": "hold", "stream": "upstream", "attributes": {"key": "lease"}});
    let (status, body) =
        server.client.request("POST", "/proxies/n1-redis/toxics", Some(hold.to_string())).await.unwrap();
    assert_eq!(status, 200, "{body}");
    // A read of the key is no renewal: it passes.
    assert_eq!(command(&mut s, &["GET", "lease"]).await, b"$3\r\ntok\r\n");
    use tokio::io::AsyncWriteExt;
    let renew = format!(
        "*6\r\n$4\r\nEVAL\r\n${}\r\n{RENEW}\r\n$1\r\n1\r\n$5\r\nlease\r\n$3\r\ntok\r\n$5\r\n60000\r\n",
        RENEW.len()
    );
    s.write_all(renew.as_bytes()).await.unwrap();
    s.write_all(b"*2\r\n$3\r\nGET\r\n$5\r\nlease\r\n").await.unwrap();
    assert_eq!(read_within(&mut s, Duration::from_millis(300)).await, ReadEnd::Nothing, "the renewal is held");
    let page = server.client.witness("n1-redis", 2).await.unwrap().unwrap();
    assert_eq!(page.records.iter().map(|r| r.held).collect::<Vec<_>>(), [true, true], "{:?}", page.records);
    assert!(page.records.iter().all(|r| r.reply.is_none()));
    server.client.remove_toxic("n1-redis", "stall").await.unwrap();
    let mut buf = vec![0u8; 64];
    use tokio::io::AsyncReadExt;
    let mut got = Vec::new();
    while got.len() < b":1\r\n$3\r\ntok\r\n".len() {
        let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf)).await.unwrap().unwrap();
        got.extend_from_slice(&buf[..n]);
    }
    assert_eq!(got, b":1\r\n$3\r\ntok\r\n", "released in order");
    let (status, _) = server
        .client
        .request(
            "POST",
            "/proxies/n1-redis/toxics",
            Some(r#"{"type":"hold","stream":"upstream","attributes":{}}"#.into()),
        )
        .await
        .unwrap();
    assert_eq!(status, 400, "a hold names its key");
    server.stop().await;
}

/// Reads until the connection ends; what came before the end, and how it ended.
async fn read_to_end(s: &mut TcpStream) -> (Vec<u8>, ReadEnd) {
    use tokio::io::AsyncReadExt;
    let (mut got, mut buf) = (Vec::new(), [0u8; 256]);
    loop {
        match tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf)).await {
            Err(_) => return (got, ReadEnd::Nothing),
            Ok(Ok(0)) => return (got, ReadEnd::Eof),
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
            Ok(Err(e)) => return (got, ReadEnd::OtherError(e.kind().to_string())),
        }
    }
}

#[tokio::test]
async fn a_lose_reply_drops_the_reply_to_the_first_aimed_command_only_and_the_command_runs() {
    use tokio::io::AsyncWriteExt;
    let redis = Redis::start().await;
    let server = Server::start().await;
    let p = server.client.create_proxy("n1-redis", "127.0.0.1:0", &redis.addr.to_string()).await.unwrap();
    let mut s = TcpStream::connect(&p.listen).await.unwrap();
    assert_eq!(command(&mut s, &["SET", "lease", "tok", "NX", "PX", "60000"]).await, b"+OK\r\n");
    server.client.add_toxic("n1-redis", &ToxicSpec::lose_reply("lease", "renew").named("lose")).await.unwrap();
    // A read and an acquire of another key are not aimed at: they pass.
    assert_eq!(command(&mut s, &["GET", "lease"]).await, b"$3\r\ntok\r\n");
    // Pipelined: the GET's reply arrives, the renewal's is lost and the connection closed.
    s.write_all(b"*2\r\n$3\r\nGET\r\n$5\r\nlease\r\n*3\r\n$7\r\nPEXPIRE\r\n$5\r\nlease\r\n$4\r\n5000\r\n")
        .await
        .unwrap();
    let (got, end) = read_to_end(&mut s).await;
    assert_eq!(got, b"$3\r\ntok\r\n", "what came before the lost reply went on");
    assert!(matches!(end, ReadEnd::Eof | ReadEnd::OtherError(_)), "the connection was closed: {end:?}");
    // The renewal ran: the key's ttl is the one it set.
    let mut direct = TcpStream::connect(redis.addr).await.unwrap();
    let pttl = String::from_utf8(command(&mut direct, &["PTTL", "lease"]).await).unwrap();
    let pttl: i64 = pttl.trim_start_matches(':').trim().parse().unwrap();
    assert!((1..=5000).contains(&pttl), "PTTL {pttl}: the renewal set 5000");
    let page = server.client.witness("n1-redis", 0).await.unwrap().unwrap();
    let lost: Vec<_> = page.records.iter().filter(|r| r.reply.is_some() && r.reply_ns.is_none()).collect();
    assert_eq!(lost.len(), 1, "{:?}", page.records);
    assert_eq!(lost[0].request, WireRequest::Redis { args: ["PEXPIRE", "lease", "5000"].map(str::to_owned).to_vec() });
    assert_eq!(lost[0].reply, Some(WireReply::Redis(Resp::Int(1))));
    // Once per toxic: the next renewal, on a new connection, is answered.
    let mut again = TcpStream::connect(&p.listen).await.unwrap();
    assert_eq!(command(&mut again, &["PEXPIRE", "lease", "60000"]).await, b":1\r\n");
    // Aimed at releases, a new toxic loses the DEL's reply; the key is gone.
    server.client.remove_toxic("n1-redis", "lose").await.unwrap();
    server.client.add_toxic("n1-redis", &ToxicSpec::lose_reply("lease", "release").named("lose2")).await.unwrap();
    assert_eq!(command(&mut again, &["PEXPIRE", "lease", "60000"]).await, b":1\r\n", "a renewal is no release");
    again.write_all(b"*2\r\n$3\r\nDEL\r\n$5\r\nlease\r\n").await.unwrap();
    assert_eq!(read_to_end(&mut again).await.0, b"");
    assert_eq!(command(&mut direct, &["EXISTS", "lease"]).await, b":0\r\n");
    // The toxic shows its aim; a lose_reply names its command and acts on replies.
    let shown = server.client.request("GET", "/proxies/n1-redis/toxics/lose2", None).await.unwrap().1;
    assert!(shown.contains(r#""command":"release""#) && shown.contains(r#""key":"lease""#), "{shown}");
    for bad in [
        r#"{"type":"lose_reply","stream":"downstream","attributes":{"key":"lease"}}"#,
        r#"{"type":"lose_reply","stream":"downstream","attributes":{"key":"lease","command":"check"}}"#,
        r#"{"type":"lose_reply","stream":"upstream","attributes":{"key":"lease","command":"renew"}}"#,
    ] {
        let (status, body) = server.client.request("POST", "/proxies/n1-redis/toxics", Some(bad.into())).await.unwrap();
        assert_eq!(status, 400, "{bad}: {body}");
    }
    server.stop().await;
}

#[tokio::test]
async fn a_latency_aimed_at_a_key_delays_only_the_requests_of_its_commands() {
    use tokio::io::AsyncWriteExt;
    let redis = Redis::start().await;
    let server = Server::start().await;
    let p = server.client.create_proxy("n1-redis", "127.0.0.1:0", &redis.addr.to_string()).await.unwrap();
    let toxic = ToxicSpec::latency_aimed("lease", "lease", 1000, 0).named("slow-lease");
    server.client.add_toxic("n1-redis", &toxic).await.unwrap();
    let mut lease = TcpStream::connect(&p.listen).await.unwrap();
    let mut other = TcpStream::connect(&p.listen).await.unwrap();
    lease.write_all(b"*6\r\n$3\r\nSET\r\n$5\r\nlease\r\n$3\r\ntok\r\n$2\r\nNX\r\n$2\r\nPX\r\n").await.unwrap();
    lease.write_all(b"$5\r\n60000\r\n").await.unwrap();
    // Sent after the lease command, answered before it: only the lease command waits.
    assert_eq!(command(&mut other, &["SET", "other", "v"]).await, b"+OK\r\n");
    let mut direct = TcpStream::connect(redis.addr).await.unwrap();
    assert_eq!(command(&mut direct, &["EXISTS", "lease"]).await, b":0\r\n", "the lease command is still held back");
    let (got, _) = {
        use tokio::io::AsyncReadExt;
        let mut buf = [0u8; 64];
        let n = tokio::time::timeout(Duration::from_secs(5), lease.read(&mut buf)).await.unwrap().unwrap();
        (buf[..n].to_vec(), ())
    };
    assert_eq!(got, b"+OK\r\n");
    let page = server.client.witness("n1-redis", 0).await.unwrap().unwrap();
    let set =
        page.records.iter().find(|r| matches!(&r.request, WireRequest::Redis { args } if args[1] == "lease")).unwrap();
    assert!(set.reply_ns.unwrap() - set.sent_ns >= 1_000_000_000, "the lease command waited its latency");
    let shown = server.client.request("GET", "/proxies/n1-redis/toxics/slow-lease", None).await.unwrap().1;
    assert!(shown.contains(r#""command":"lease""#) && shown.contains(r#""latency":1000"#), "{shown}");
    let downstream =
        r#"{"type":"latency","stream":"downstream","attributes":{"latency":5,"key":"lease","command":"lease"}}"#;
    let (status, body) =
        server.client.request("POST", "/proxies/n1-redis/toxics", Some(downstream.into())).await.unwrap();
    assert_eq!(status, 400, "{body}");
    server.stop().await;
}
