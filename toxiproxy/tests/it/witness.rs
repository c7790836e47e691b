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
