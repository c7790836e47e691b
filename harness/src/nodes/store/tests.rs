use leasequake_reports::history::{StoreOp, StorePolicy};

use super::{Store, StoreRequest};

fn req(token: &str, fence: u64, collection: &str) -> StoreRequest {
    StoreRequest {
        tenant: "t".into(),
        node: token.split('/').next().unwrap_or("n").into(),
        token: token.into(),
        fence,
        call: 1,
        collection: Some(collection.into()),
        points: 8,
    }
}

#[track_caller]
fn check(store: &Store, op: StoreOp, r: &StoreRequest, status: u16) {
    let a = store.apply(op, r);
    assert_eq!(a.status, status, "{op:?} {r:?} -> {}", a.body);
}

#[test]
fn enforce_rejects_a_write_under_an_older_fence_after_a_newer_one() {
    let s = Store::new(StorePolicy::Enforce, None).unwrap();
    check(&s, StoreOp::CreateCollection, &req("n1/1", 1, "c1"), 200);
    check(&s, StoreOp::CreateCollection, &req("n2/1", 2, "c2"), 200);
    check(&s, StoreOp::Upsert, &req("n1/1", 1, "c1"), 409);
    let audit = s.audit_after(0);
    assert_eq!(audit.iter().map(|r| r.seq).collect::<Vec<_>>(), [1, 2, 3], "gap-free arrival order");
    assert!(!audit[2].accepted && audit[2].reason.as_deref().unwrap().contains("stale fence 1 < newest 2"));
}

#[test]
fn enforce_rejects_a_second_owner_presenting_the_newest_fence() {
    let s = Store::new(StorePolicy::Enforce, None).unwrap();
    check(&s, StoreOp::CreateCollection, &req("n1/1", 5, "c1"), 200);
    let a = s.apply(StoreOp::CreateCollection, &req("n2/1", 5, "c2"));
    assert_eq!(a.status, 409);
    assert!(a.body["error"].as_str().unwrap().contains("fence anomaly"));
}

#[test]
fn observe_accepts_what_enforce_rejects() {
    let s = Store::new(StorePolicy::Observe, None).unwrap();
    check(&s, StoreOp::CreateCollection, &req("n1/1", 1, "c1"), 200);
    check(&s, StoreOp::CreateCollection, &req("n2/1", 2, "c2"), 200);
    check(&s, StoreOp::Upsert, &req("n1/1", 1, "c1"), 200);
}

#[test]
fn the_flawed_store_fences_everything_but_the_persist() {
    let s = Store::new(StorePolicy::FlawedSkipsPersist, None).unwrap();
    check(&s, StoreOp::CreateCollection, &req("n2/1", 2, "c2"), 200);
    check(&s, StoreOp::CreateCollection, &req("n1/1", 1, "c1"), 409);
    check(&s, StoreOp::PersistRecord, &req("n1/1", 1, "c1"), 200);
}

#[test]
fn epochs_are_issued_strictly_increasing_and_fence_older_owners_out() {
    let s = Store::new(StorePolicy::Enforce, None).unwrap();
    let e1 = s.apply(StoreOp::BeginEpoch, &req("n1/1", 0, "-")).body["fence"].as_u64().unwrap();
    let e2 = s.apply(StoreOp::BeginEpoch, &req("n2/1", 0, "-")).body["fence"].as_u64().unwrap();
    assert!(e2 > e1);
    check(&s, StoreOp::CreateCollection, &req("n1/1", e1, "c1"), 409);
    check(&s, StoreOp::CreateCollection, &req("n2/1", e2, "c2"), 200);
}

#[test]
fn alias_versions_rise_and_a_repeated_switch_is_idempotent() {
    let s = Store::new(StorePolicy::Enforce, None).unwrap();
    check(&s, StoreOp::CreateCollection, &req("n1/1", 1, "c1"), 200);
    let v1 = s.apply(StoreOp::SwitchAlias, &req("n1/1", 1, "c1")).body["alias_version"].as_u64();
    let again = s.apply(StoreOp::SwitchAlias, &req("n1/1", 1, "c1")).body["alias_version"].as_u64();
    check(&s, StoreOp::CreateCollection, &req("n2/1", 2, "c2"), 200);
    let v2 = s.apply(StoreOp::SwitchAlias, &req("n2/1", 2, "c2")).body["alias_version"].as_u64();
    assert_eq!((v1, again, v2), (Some(1), Some(1), Some(2)));
    check(&s, StoreOp::DropCollection, &req("n2/1", 2, "c2"), 409); // the live target stays
    check(&s, StoreOp::DropCollection, &req("n2/1", 2, "c1"), 200);
    assert_eq!(s.tenant_view("t")["alias"], "c2");
}

#[test]
fn bad_requests_are_audited_and_change_nothing() {
    let s = Store::new(StorePolicy::Enforce, None).unwrap();
    check(&s, StoreOp::Upsert, &req("n1/1", 1, "missing"), 404);
    let mut no_collection = req("n1/1", 1, "x");
    no_collection.collection = None;
    check(&s, StoreOp::CreateCollection, &no_collection, 400);
    assert_eq!(s.tenant_view("t")["collections"], serde_json::json!([]));
    assert_eq!(s.tenant_view("t")["newest_fence"], 0, "a rejected write moves no fence");
    assert_eq!(s.audit_after(0).len(), 2);
}
