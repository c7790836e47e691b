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
