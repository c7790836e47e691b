//! The harness's async client: a failed call is an error naming the call, never a silent success.

use std::time::Duration;

use leasequake_toxiproxy::{Client, ClientError, Stream, ToxicSpec};

use crate::support::{echo, Server};

#[tokio::test]
async fn failed_calls_are_errors_with_the_status_and_message() {
    let s = Server::start().await;
    let err = s.client.add_toxic("missing", &ToxicSpec::latency(Stream::Upstream, 1, 0)).await.unwrap_err();
    let ClientError::Status { status, message, .. } = &err else { panic!("{err:?}") };
    assert_eq!((*status, message.as_str()), (404, "proxy not found"));
    assert!(err.to_string().contains("/proxies/missing/toxics"), "{err}");
    let (up, _stop) = echo().await;
    s.client.create_proxy("p", "127.0.0.1:0", &up.to_string()).await.unwrap();
    let dup = s.client.create_proxy("p", "127.0.0.1:0", &up.to_string()).await.unwrap_err();
    assert!(matches!(dup, ClientError::Status { status: 409, .. }), "{dup}");
    assert!(matches!(s.client.remove_toxic("p", "nope").await, Err(ClientError::Status { status: 404, .. })));
    assert_eq!(s.client.proxies().await.unwrap().len(), 1);
    assert_eq!(s.client.version().await.unwrap(), "2.12.0");
    s.client.reset().await.unwrap();
    s.client.delete_proxy("p").await.unwrap();
}

#[tokio::test]
async fn an_absent_server_is_reported_as_unreachable_within_the_timeout() {
    let free = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap();
    let client = Client::new(free.to_string()).with_timeout(Duration::from_secs(1));
    let err = client.version().await.unwrap_err();
    assert!(matches!(err, ClientError::Unreachable { .. }), "{err}");
    assert!(err.to_string().contains(&free.to_string()));
}
