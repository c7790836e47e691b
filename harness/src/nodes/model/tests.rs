use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::{embed, Model};

fn clock() -> (Arc<AtomicU64>, Model) {
    let t = Arc::new(AtomicU64::new(100));
    let read = t.clone();
    (t, Model::new(Arc::new(move || read.load(Ordering::Relaxed))))
}

const BODY: &str = r#"{"tenant":"t","node":"n1","token":"n1/1/0/a","fence":3,"batch":2,"ms":20}"#;

#[tokio::test(start_paused = true)]
async fn a_call_is_logged_on_arrival_and_marked_when_it_answers() {
    let (t, model) = clock();
    let call = embed(&model, BODY.as_bytes());
    tokio::pin!(call);
    assert!(futures_util::poll!(call.as_mut()).is_pending());
    assert_eq!(model.audit_seq(), 1);
    assert_eq!(model.audit_after(0)[0].finished_ns, None);
    t.store(125, Ordering::Relaxed);
    let (status, _) = call.await;
    assert_eq!(status, 200);
    let r = &model.audit_after(0)[0];
    assert_eq!((r.seq, r.arrived_ns, r.finished_ns, r.batch, r.fence, r.ms), (1, 100, Some(125), 2, 3, 20));
    assert!(model.audit_after(1).is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_call_whose_caller_went_away_stays_unfinished() {
    let (_t, model) = clock();
    {
        let call = embed(&model, BODY.as_bytes());
        tokio::pin!(call);
        assert!(futures_util::poll!(call.as_mut()).is_pending());
    }
    assert_eq!(model.audit_after(0)[0].finished_ns, None);
}

#[tokio::test(start_paused = true)]
async fn bad_calls_are_refused_and_not_logged() {
    let (_t, model) = clock();
    assert_eq!(embed(&model, b"{}").await.0, 400);
    let long = BODY.replace("\"ms\":20", "\"ms\":60001");
    assert_eq!(embed(&model, long.as_bytes()).await.0, 400);
    assert_eq!(model.audit_seq(), 0);
}
