//! The HTTP API's shapes, defaults, status codes and error bodies, over raw HTTP.

use serde_json::{json, Value};

use crate::support::{echo, Server};

async fn call(s: &Server, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let (status, text) = s.client.request(method, path, body.map(|b| b.to_string())).await.unwrap();
    (
        status,
        if text.trim().is_empty() { Value::Null } else { serde_json::from_str(&text).unwrap_or(Value::String(text)) },
    )
}

#[tokio::test]
async fn proxies_are_created_shown_listed_updated_and_deleted() {
    let s = Server::start().await;
    let (up, _stop) = echo().await;
    let (status, p) = call(
        &s,
        "POST",
        "/proxies",
        Some(json!({"name": "redis", "listen": "127.0.0.1:0", "upstream": up.to_string()})),
    )
    .await;
    assert_eq!(status, 201);
    assert_eq!(p["name"], "redis");
    assert_eq!(p["enabled"], true);
    assert_eq!(p["toxics"], json!([]));
    let listen = p["listen"].as_str().unwrap().to_owned();
    assert!(!listen.ends_with(":0"), "listen reports the bound port: {listen}");

    let (status, all) = call(&s, "GET", "/proxies", None).await;
    assert_eq!(status, 200);
    assert_eq!(all["redis"]["listen"], listen.as_str());

    // A partial update keeps the other fields.
    let (status, p) = call(&s, "PATCH", "/proxies/redis", Some(json!({"enabled": false}))).await;
    assert_eq!(
        (status, &p["enabled"], &p["listen"], &p["upstream"]),
        (200, &json!(false), &json!(listen), &json!(up.to_string()))
    );
    let (status, p) = call(&s, "POST", "/proxies/redis", Some(json!({"enabled": true}))).await;
    assert_eq!((status, &p["enabled"]), (200, &json!(true)));

    assert_eq!(call(&s, "DELETE", "/proxies/redis", None).await.0, 204);
    let (status, err) = call(&s, "GET", "/proxies/redis", None).await;
    assert_eq!((status, err), (404, json!({"error": "proxy not found", "status": 404})));
}

#[tokio::test]
async fn bad_requests_get_toxiproxys_status_and_a_message_naming_the_problem() {
    let s = Server::start().await;
    let (up, _stop) = echo().await;
    let create = |name: &str| json!({"name": name, "listen": "127.0.0.1:0", "upstream": up.to_string()});
    assert_eq!(call(&s, "POST", "/proxies", Some(create("a"))).await.0, 201);

    let cases: Vec<(&str, String, Option<Value>, u16, &str)> = vec![
        ("POST", "/proxies".into(), Some(create("a")), 409, "proxy already exists"),
        (
            "POST",
            "/proxies".into(),
            Some(json!({"name": "b", "listen": "127.0.0.1:0"})),
            400,
            "missing required field: upstream",
        ),
        ("POST", "/proxies".into(), Some(json!({"upstream": "x:1"})), 400, "missing required field: name"),
        ("POST", "/proxies/a/toxics".into(), Some(json!({"type": "lag"})), 400, "invalid toxic type"),
        (
            "POST",
            "/proxies/a/toxics".into(),
            Some(json!({"type": "latency", "stream": "up"})),
            400,
            "stream was invalid",
        ),
        ("POST", "/proxies/nope/toxics".into(), Some(json!({"type": "latency"})), 404, "proxy not found"),
        ("GET", "/proxies/a/toxics/none".into(), None, 404, "toxic not found"),
        ("DELETE", "/proxies/a/toxics/none".into(), None, 404, "toxic not found"),
    ];
    for (method, path, body, want, msg) in cases {
        let (status, err) = call(&s, method, &path, body).await;
        assert_eq!(status, want, "{method} {path}: {err}");
        assert_eq!(err["status"], want);
        assert!(err["error"].as_str().unwrap().contains(msg), "{method} {path}: {err}");
    }
    // Malformed JSON, raw.
    let (status, text) = s.client.request("POST", "/proxies", Some("{name: oops".into())).await.unwrap();
    assert_eq!(status, 400);
    assert!(text.contains("bad request body"), "{text}");
    // Duplicate toxic names.
    assert_eq!(call(&s, "POST", "/proxies/a/toxics", Some(json!({"type": "noop"}))).await.0, 200);
    let (status, err) = call(&s, "POST", "/proxies/a/toxics", Some(json!({"type": "noop"}))).await;
    assert_eq!((status, err["error"].as_str().unwrap()), (409, "toxic already exists"));
    // A port in use names the address; the other proxy is untouched.
    let taken = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let (status, err) =
        call(&s, "POST", "/proxies", Some(json!({"name": "c", "listen": addr, "upstream": "x:1"}))).await;
    assert_eq!(status, 500);
    assert!(err["error"].as_str().unwrap().contains(&addr), "{err}");
    assert_eq!(call(&s, "GET", "/proxies/a", None).await.0, 200);
    assert_eq!(call(&s, "GET", "/proxies/c", None).await.0, 404, "a failed create leaves nothing behind");
}

#[tokio::test]
async fn toxics_have_toxiproxys_defaults_and_update_partially() {
    let s = Server::start().await;
    let (up, _stop) = echo().await;
    call(&s, "POST", "/proxies", Some(json!({"name": "a", "listen": "127.0.0.1:0", "upstream": up.to_string()}))).await;
    let (status, t) =
        call(&s, "POST", "/proxies/a/toxics", Some(json!({"type": "latency", "attributes": {"latency": 100}}))).await;
    assert_eq!(status, 200);
    assert_eq!(
        t,
        json!({"name": "latency_downstream", "type": "latency", "stream": "downstream", "toxicity": 1.0, "attributes": {"latency": 100, "jitter": 0}})
    );
    let (status, t) =
        call(&s, "PATCH", "/proxies/a/toxics/latency_downstream", Some(json!({"attributes": {"jitter": 3}}))).await;
    assert_eq!((status, &t["attributes"]), (200, &json!({"latency": 100, "jitter": 3})));
    let (_, list) = call(&s, "GET", "/proxies/a/toxics", None).await;
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_eq!(call(&s, "DELETE", "/proxies/a/toxics/latency_downstream", None).await.0, 204);
}

#[tokio::test]
async fn reset_populate_and_version() {
    let s = Server::start().await;
    let (up, _stop) = echo().await;
    let body = json!([{"name": "a", "listen": "127.0.0.1:0", "upstream": up.to_string()}, {"name": "b", "listen": "127.0.0.1:0", "upstream": up.to_string(), "enabled": false}]);
    let (status, out) = call(&s, "POST", "/populate", Some(body)).await;
    assert_eq!(status, 201);
    assert_eq!(out["proxies"].as_array().unwrap().len(), 2);
    call(&s, "POST", "/proxies/a/toxics", Some(json!({"type": "noop"}))).await;
    assert_eq!(call(&s, "POST", "/reset", None).await.0, 204);
    let (_, all) = call(&s, "GET", "/proxies", None).await;
    assert_eq!(all["a"]["toxics"], json!([]));
    assert_eq!(all["b"]["enabled"], true, "reset re-enables every proxy");
    let (status, v) = call(&s, "GET", "/version", None).await;
    assert_eq!((status, v["version"].as_str().unwrap()), (200, "2.12.0"));
    assert_eq!(call(&s, "GET", "/nothing/here", None).await.0, 404);
    assert_eq!(call(&s, "PUT", "/proxies", None).await.0, 405);
}

#[tokio::test]
async fn hostile_requests_are_refused_with_toxiproxys_error_shape() {
    let s = Server::start().await;
    let (up, _stop) = echo().await;
    let create = |name: &str| json!({"name": name, "listen": "127.0.0.1:0", "upstream": up.to_string()});
    assert_eq!(call(&s, "POST", "/proxies", Some(create("a"))).await.0, 201);
    let latency = |attrs: Value| Some(json!({"type": "latency", "name": "l", "attributes": attrs}));
    let cases: Vec<(&str, String, Option<Value>, &str)> = vec![
        // Names that would not be one path segment: created, then unreachable.
        ("POST", "/proxies".into(), Some(create("a/b")), "proxy name"),
        ("POST", "/proxies".into(), Some(create("a b")), "proxy name"),
        ("POST", "/proxies".into(), Some(create(&"x".repeat(129))), "proxy name"),
        ("POST", "/proxies/a/toxics".into(), Some(json!({"type": "noop", "name": "n/1"})), "toxic name"),
        // Attributes out of range, fractional, or too large for a float to hold exactly.
        ("POST", "/proxies/a/toxics".into(), latency(json!({"latency": 9_223_372_036_854_775_808u64})), "latency"),
        ("POST", "/proxies/a/toxics".into(), latency(json!({"latency": 1e300})), "latency"),
        ("POST", "/proxies/a/toxics".into(), latency(json!({"latency": 10, "jitter": u64::MAX})), "jitter"),
        ("POST", "/proxies/a/toxics".into(), latency(json!({"latency": 1.5})), "latency"),
        ("POST", "/proxies/a/toxics".into(), latency(json!({"latency": 3_600_001})), "latency"),
    ];
    for (method, path, body, msg) in cases {
        let (status, err) = call(&s, method, &path, body.clone()).await;
        assert_eq!(status, 400, "{method} {path} {body:?}: {err}");
        assert_eq!(err["status"], 400);
        assert!(err["error"].as_str().unwrap().contains(msg), "{method} {path}: {err}");
    }
    // The largest values in range are taken, and shown as given.
    let (status, t) = call(&s, "POST", "/proxies/a/toxics", latency(json!({"latency": 3_600_000, "jitter": 0}))).await;
    assert_eq!((status, &t["attributes"]["latency"]), (200, &json!(3_600_000)));
    // A patch out of range leaves the toxic as it was.
    let (status, _) = call(&s, "PATCH", "/proxies/a/toxics/l", Some(json!({"attributes": {"latency": -1}}))).await;
    assert_eq!(status, 400);
    assert_eq!(call(&s, "GET", "/proxies/a/toxics/l", None).await.1["attributes"]["latency"], json!(3_600_000));
}

#[tokio::test]
async fn a_proxy_pointed_at_the_server_itself_is_refused() {
    let s = Server::start().await;
    let api = s.api.to_string();
    // At the API.
    let (status, err) =
        call(&s, "POST", "/proxies", Some(json!({"name": "api", "listen": "127.0.0.1:0", "upstream": api}))).await;
    assert_eq!(status, 400, "{err}");
    assert!(err["error"].as_str().unwrap().contains("loop back"), "{err}");
    // At its own listen address, given or picked by the system (port 0), or via localhost.
    let free = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap();
    let own = json!({"name": "own", "listen": free.to_string(), "upstream": format!("localhost:{}", free.port())});
    let (status, err) = call(&s, "POST", "/proxies", Some(own)).await;
    assert_eq!(status, 400, "{err}");
    assert_eq!(call(&s, "GET", "/proxies/own", None).await.0, 404, "a refused proxy leaves nothing behind");
    // At another proxy's listen address, by a later update.
    let (up, _stop) = echo().await;
    let (_, a) =
        call(&s, "POST", "/proxies", Some(json!({"name": "a", "listen": "127.0.0.1:0", "upstream": up.to_string()})))
            .await;
    let (_, b) =
        call(&s, "POST", "/proxies", Some(json!({"name": "b", "listen": "127.0.0.1:0", "upstream": up.to_string()})))
            .await;
    let (status, err) = call(&s, "POST", "/proxies/b", Some(json!({"upstream": a["listen"]}))).await;
    assert_eq!(status, 400, "{err}");
    assert_eq!(call(&s, "GET", "/proxies/b", None).await.1["upstream"], b["upstream"], "b is unchanged");
    // The same port on another host is an ordinary upstream (`listen :6379`, `upstream redis:6379`).
    let port = free.port();
    let other =
        json!({"name": "other", "listen": format!("127.0.0.1:{port}"), "upstream": format!("10.255.255.1:{port}")});
    assert_eq!(call(&s, "POST", "/proxies", Some(other)).await.0, 201);
}

#[tokio::test]
async fn idle_half_sent_requests_cannot_lock_the_api_out() {
    use tokio::io::AsyncWriteExt;
    let s = Server::start().await;
    // More half-sent requests than the API holds places for: the extra ones are closed at once,
    // and every one is closed by the header read timeout, after which the API answers again.
    let mut held = Vec::new();
    for _ in 0..leasequake_toxiproxy::api::MAX_API_CONNECTIONS + 8 {
        let mut c = tokio::net::TcpStream::connect(s.api).await.unwrap();
        let _ = c.write_all(b"GET /version HTTP/1.1\r\nHost: x\r\n").await;
        held.push(c);
    }
    // Within the read timeout plus a margin: polled, not timed.
    let mut answered = false;
    for _ in 0..200 {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        if let Ok(Ok((200, _))) =
            tokio::time::timeout(std::time::Duration::from_secs(2), s.client.request("GET", "/version", None)).await
        {
            answered = true;
            break;
        }
    }
    assert!(answered, "the API answered again once the half-sent requests were timed out");
    // The server closed a half-sent request itself (before the fix it held it forever).
    use tokio::io::AsyncReadExt;
    let mut buf = [0u8; 256];
    let ended = tokio::time::timeout(std::time::Duration::from_secs(30), held[0].read(&mut buf)).await;
    assert!(ended.is_ok(), "a half-sent request was held open for 30 s");
}

#[tokio::test]
async fn deleting_a_proxy_whose_client_does_not_read_closes_its_links_and_leaves_the_api_answering() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // An upstream that writes without end; a client that never reads: the proxy's pump blocks in
    // its write to the client.
    let flood = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let up = flood.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut c, _)) = flood.accept().await {
            tokio::spawn(async move { while c.write_all(&[7u8; 64 * 1024]).await.is_ok() {} });
        }
    });
    let s = Server::start().await;
    let (_, p) =
        call(&s, "POST", "/proxies", Some(json!({"name": "f", "listen": "127.0.0.1:0", "upstream": up.to_string()})))
            .await;
    let mut client = tokio::net::TcpStream::connect(p["listen"].as_str().unwrap()).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let t = std::time::Instant::now();
    let (deleted, listed) = tokio::join!(call(&s, "DELETE", "/proxies/f", None), async {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        call(&s, "GET", "/proxies", None).await
    });
    assert_eq!((deleted.0, listed.0), (204, 200));
    // Not the 2 s grace a stuck link used to take, under the lock every other call waits on.
    assert!(t.elapsed() < std::time::Duration::from_millis(1500), "{:?}", t.elapsed());
    // The client, reading now, drains what was in flight and sees its connection end.
    let mut buf = vec![0u8; 1 << 20];
    let ended = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        loop {
            match client.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the deleted proxy's link is still delivering");
}

#[tokio::test]
async fn a_populate_that_fails_leaves_nothing_behind_and_the_caps_are_named() {
    let s = Server::start().await;
    let (up, _stop) = echo().await;
    let (_, kept) = call(
        &s,
        "POST",
        "/proxies",
        Some(json!({"name": "kept", "listen": "127.0.0.1:0", "upstream": up.to_string()})),
    )
    .await;
    // Three good proxies, an update of `kept`, then one that cannot bind (the API's own port).
    let api = s.api.to_string();
    let mut batch: Vec<Value> =
        (0..3).map(|i| json!({"name": format!("p{i}"), "listen": "127.0.0.1:0", "upstream": up.to_string()})).collect();
    batch.push(json!({"name": "kept", "listen": kept["listen"], "upstream": "10.255.255.1:9", "enabled": true}));
    batch.push(json!({"name": "bad", "listen": api, "upstream": up.to_string()}));
    let (status, body) = call(&s, "POST", "/populate", Some(Value::Array(batch))).await;
    assert!(status >= 400, "{status} {body}");
    assert_eq!(body["proxies"], json!([]), "{body}");
    let (_, all) = call(&s, "GET", "/proxies", None).await;
    let names: Vec<&String> = all.as_object().unwrap().keys().collect();
    assert_eq!(names, ["kept"], "all or nothing: {all}");
    assert_eq!(all["kept"]["upstream"], kept["upstream"], "the update is undone");
    // More proxies than a server holds: refused whole, naming the cap.
    let many: Vec<Value> = (0..1001)
        .map(|i| json!({"name": format!("m{i}"), "listen": "127.0.0.1:0", "upstream": up.to_string()}))
        .collect();
    let (status, body) = call(&s, "POST", "/populate", Some(Value::Array(many))).await;
    assert_eq!(status, 400, "{body}");
    assert!(body["error"].as_str().unwrap().contains("at most 1000"), "{body}");
    // Toxics per proxy are capped too.
    for i in 0..64 {
        let t = json!({"name": format!("n{i}"), "type": "noop"});
        assert_eq!(call(&s, "POST", "/proxies/kept/toxics", Some(t)).await.0, 200);
    }
    let (status, body) =
        call(&s, "POST", "/proxies/kept/toxics", Some(json!({"name": "one-more", "type": "noop"}))).await;
    assert_eq!(status, 400, "{body}");
    assert!(body["error"].as_str().unwrap().contains("at most 64 toxics"), "{body}");
}
