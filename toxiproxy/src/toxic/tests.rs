use super::*;

#[test]
fn defaults_follow_toxiproxy() {
    let t = Toxic::from_json(br#"{"type":"latency","attributes":{"latency":100}}"#).unwrap();
    assert_eq!(t.name, "latency_downstream");
    assert_eq!(t.stream, Stream::Downstream);
    assert!((t.toxicity - 1.0).abs() < f32::EPSILON);
    assert_eq!(t.effect, Effect::Latency { latency: 100, jitter: 0 });
    assert_eq!(t.to_json()["attributes"], serde_json::json!({"latency": 100, "jitter": 0}));
}

#[test]
fn bad_toxics_are_rejected_with_the_reason() {
    assert_eq!(Toxic::from_json(br#"{"type":"lag"}"#), Err(ApiError::InvalidToxicType));
    assert_eq!(Toxic::from_json(br#"{"type":"latency","stream":"sideways"}"#), Err(ApiError::InvalidStream));
    assert!(matches!(Toxic::from_json(b"{not json"), Err(ApiError::BadRequestBody(_))));
    assert!(matches!(Toxic::from_json(br#"{"type":"noop","toxicity":2}"#), Err(ApiError::BadRequestBody(_))));
    assert!(matches!(
        Toxic::from_json(br#"{"type":"latency","attributes":{"latency":-5}}"#),
        Err(ApiError::BadRequestBody(_))
    ));
}

#[test]
fn update_keeps_attributes_not_given() {
    let t = Toxic::from_json(br#"{"type":"latency","attributes":{"latency":100,"jitter":5}}"#).unwrap();
    let u = t.update_from_json(br#"{"attributes":{"latency":7}}"#).unwrap();
    assert_eq!(u.effect, Effect::Latency { latency: 7, jitter: 5 });
    assert_eq!(u.name, t.name);
}
