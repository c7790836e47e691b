use super::{classify, touches, Classified, LeaseOp, Outcome, Scripts};
use crate::wire::{Resp, WireRecord, WireReply, WireRequest};

const LEASE: &str = "leasequake:{t1}:lease";
const FENCE: &str = "leasequake:{t1}:fence";

// Scripts of the shapes lease libraries use, written for these tests.
const ACQUIRE: &str = "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then\n  return {1, redis.call('INCR', KEYS[2])}\nend\nreturn {0, redis.call('PTTL', KEYS[1])}";
const RENEW: &str =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0";
const RELEASE: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";
const INVERTED_EXTEND: &str = "if redis.call(\"get\", KEYS[1]) ~= ARGV[1] then\n return 1\nelseif redis.call(\"ttl\", KEYS[1]) < 0 then\n return 2\nelse\n redis.call(\"expire\", KEYS[1], ARGV[2])\n return 0\nend";
const INVERTED_UNLOCK: &str = "if redis.call(\"get\", KEYS[1]) ~= ARGV[1] then return 1 else redis.call(\"del\", KEYS[2]) redis.call(\"pexpire\", KEYS[2], ARGV[2]) redis.call(\"del\", KEYS[1]) return 0 end";
const SET_OWNED: &str = "local held = redis.call('get', KEYS[1])\nif not held or held == ARGV[1] then\n  return redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])\nelse\n  return redis.error_reply('NOT OWNER')\nend";

fn record(args: &[&str], reply: Option<Resp>) -> WireRecord {
    WireRecord {
        seq: 1,
        link: "n1-redis".into(),
        conn: 1,
        sent_ns: 10,
        forwarded: true,
        request: WireRequest::Redis { args: args.iter().map(|a| (*a).to_owned()).collect() },
        reply_ns: reply.as_ref().map(|_| 20),
        reply: reply.map(WireReply::Redis),
        held: false,
        lost: false,
    }
}

#[track_caller]
fn check(scripts: &Scripts, args: &[&str], reply: Option<Resp>, expect: (LeaseOp, Option<&str>, Option<u64>, Outcome)) {
    let got = classify(&record(args, reply), LEASE, FENCE, scripts).expect("classified");
    let (op, token, ttl, outcome) = expect;
    assert_eq!((got.op, got.token.as_deref(), got.ttl_ms, got.outcome.clone()), (op, token, ttl, outcome), "{got:?}");
}

fn loaded(bodies: &[&str]) -> (Scripts, Vec<String>) {
    let records: Vec<WireRecord> = bodies.iter().map(|b| record(&["SCRIPT", "LOAD", b], None)).collect();
    let scripts = Scripts::learn(&records);
    let shas = bodies.iter().map(|b| sha1_smol::Sha1::from(b.as_bytes()).digest().to_string()).collect();
    (scripts, shas)
}

#[test]
fn the_reference_scripts_read_as_acquire_renew_release_with_token_and_ttl() {
    let (s, sha) = loaded(&[ACQUIRE, RENEW, RELEASE]);
    let won = Resp::Array(Some(vec![Resp::Int(1), Resp::Int(7)]));
    let lost = Resp::Array(Some(vec![Resp::Int(0), Resp::Int(900)]));
    let acquire = |reply| {
        check(
            &s,
            &["EVALSHA", &sha[0], "2", LEASE, FENCE, "n1/1/0/ab", "1500"],
            Some(reply),
            (LeaseOp::Acquire, Some("n1/1/0/ab"), Some(1500), Outcome::Done),
        )
    };
    acquire(won);
    check(
        &s,
        &["EVALSHA", &sha[0], "2", LEASE, FENCE, "n1/1/0/ab", "1500"],
        Some(lost),
        (LeaseOp::Acquire, Some("n1/1/0/ab"), Some(1500), Outcome::Refused),
    );
    check(
        &s,
        &["EVALSHA", &sha[1], "1", LEASE, "n1/1/0/ab", "1500"],
        Some(Resp::Int(1)),
        (LeaseOp::Renew, Some("n1/1/0/ab"), Some(1500), Outcome::Done),
    );
    check(
        &s,
        &["evalsha", &sha[1].to_uppercase(), "1", LEASE, "n1/1/0/ab", "1500"],
        Some(Resp::Int(0)),
        (LeaseOp::Renew, Some("n1/1/0/ab"), Some(1500), Outcome::Refused),
    );
    check(
        &s,
        &["EVALSHA", &sha[2], "1", LEASE, "n1/1/0/ab"],
        Some(Resp::Int(1)),
        (LeaseOp::Release, Some("n1/1/0/ab"), None, Outcome::Done),
    );
    check(
        &s,
        &["EVALSHA", &sha[2], "1", LEASE, "n1/1/0/ab"],
        None,
        (LeaseOp::Release, Some("n1/1/0/ab"), None, Outcome::NoReply),
    );
    // EVAL carries its body: no load needed.
    check(
        &Scripts::default(),
        &["EVAL", RENEW, "1", LEASE, "tok", "900"],
        Some(Resp::Int(1)),
        (LeaseOp::Renew, Some("tok"), Some(900), Outcome::Done),
    );
}

#[test]
fn a_script_that_returns_its_own_literals_is_read_its_way() {
    let (s, sha) = loaded(&[INVERTED_EXTEND, INVERTED_UNLOCK]);
    // EXPIRE takes seconds.
    check(
        &s,
        &["EVALSHA", &sha[0], "1", LEASE, "id", "2"],
        Some(Resp::Int(0)),
        (LeaseOp::Renew, Some("id"), Some(2000), Outcome::Done),
    );
    check(
        &s,
        &["EVALSHA", &sha[0], "1", LEASE, "id", "2"],
        Some(Resp::Int(1)),
        (LeaseOp::Renew, Some("id"), Some(2000), Outcome::Refused),
    );
    let odd =
        classify(&record(&["EVALSHA", &sha[0], "1", LEASE, "id", "2"], Some(Resp::Int(2))), LEASE, FENCE, &s).unwrap();
    assert!(matches!(odd.outcome, Outcome::Unread(_)), "{odd:?}");
    // The unlock deletes a second key too; the lease key's call decides.
    check(
        &s,
        &["EVALSHA", &sha[1], "2", LEASE, "signal", "id", "1000"],
        Some(Resp::Int(0)),
        (LeaseOp::Release, Some("id"), None, Outcome::Done),
    );
    check(
        &s,
        &["EVALSHA", &sha[1], "2", LEASE, "signal", "id", "1000"],
        Some(Resp::Int(1)),
        (LeaseOp::Release, Some("id"), None, Outcome::Refused),
    );
}

#[test]
fn one_script_for_acquire_and_renewal_is_read_as_either_and_its_error_reply_as_refused() {
    let (s, sha) = loaded(&[SET_OWNED]);
    check(
        &s,
        &["EVALSHA", &sha[0], "1", LEASE, "id", "1500"],
        Some(Resp::Simple("OK".into())),
        (LeaseOp::AcquireOrRenew, Some("id"), Some(1500), Outcome::Done),
    );
    let refused = classify(
        &record(&["EVALSHA", &sha[0], "1", LEASE, "id", "1500"], Some(Resp::Error("NOT OWNER".into()))),
        LEASE,
        FENCE,
        &s,
    )
    .unwrap();
    assert!(refused.outcome.refused() && !refused.outcome.maybe_done());
}

#[test]
fn plain_commands_read_as_a_lease_uses_them() {
    let s = Scripts::default();
    let ok = || Some(Resp::Simple("OK".into()));
    check(
        &s,
        &["SET", LEASE, "tok", "NX", "PX", "1500"],
        ok(),
        (LeaseOp::Acquire, Some("tok"), Some(1500), Outcome::Done),
    );
    check(
        &s,
        &["set", LEASE, "tok", "nx", "ex", "2"],
        Some(Resp::Bulk(None)),
        (LeaseOp::Acquire, Some("tok"), Some(2000), Outcome::Refused),
    );
    check(
        &s,
        &["SET", LEASE, "tok", "PX", "1500"],
        ok(),
        (LeaseOp::AcquireOrRenew, Some("tok"), Some(1500), Outcome::Done),
    );
    check(&s, &["PEXPIRE", LEASE, "1500"], Some(Resp::Int(1)), (LeaseOp::Renew, None, Some(1500), Outcome::Done));
    check(&s, &["EXPIRE", LEASE, "3"], Some(Resp::Int(0)), (LeaseOp::Renew, None, Some(3000), Outcome::Refused));
    check(&s, &["DEL", LEASE], Some(Resp::Int(1)), (LeaseOp::Release, None, None, Outcome::Done));
    check(&s, &["GET", LEASE], Some(Resp::Bulk(Some("tok".into()))), (LeaseOp::Check, None, None, Outcome::Done));
    check(&s, &["INCR", FENCE], Some(Resp::Int(8)), (LeaseOp::Fence, None, None, Outcome::Done));
    check(
        &s,
        &["SET", LEASE, "tok", "NX", "PX", "1500"],
        Some(Resp::Error("READONLY".into())),
        (LeaseOp::Acquire, Some("tok"), Some(1500), Outcome::Error("READONLY".into())),
    );
}

#[test]
fn what_cannot_be_read_is_said_so_never_guessed() {
    let s = Scripts::default();
    let unknown =
        classify(&record(&["EVALSHA", "ffff", "1", LEASE, "tok"], Some(Resp::Int(1))), LEASE, FENCE, &s).unwrap();
    assert_eq!(unknown.op, LeaseOp::Unknown);
    assert!(unknown.unread.as_deref().is_some_and(|w| w.contains("never saw loaded")), "{unknown:?}");
    // Unless Redis said it knew no such script: then it ran nothing.
    let noscript = Some(Resp::Error("NOSCRIPT No matching script. Please use EVAL.".into()));
    assert!(classify(&record(&["EVALSHA", "ffff", "1", LEASE, "tok"], noscript), LEASE, FENCE, &s).is_none());
    // Or the link dropped it unanswered (a blackhole): it reached no Redis. Forwarded and
    // unanswered, it may have run: still unread.
    let mut dropped = record(&["EVALSHA", "ffff", "1", LEASE, "tok"], None);
    dropped.forwarded = false;
    assert!(classify(&dropped, LEASE, FENCE, &s).is_none());
    let unanswered = classify(&record(&["EVALSHA", "ffff", "1", LEASE, "tok"], None), LEASE, FENCE, &s).unwrap();
    assert!(unanswered.unread.is_some(), "{unanswered:?}");
    let odd = classify(&record(&["HSET", LEASE, "f", "v"], Some(Resp::Int(1))), LEASE, FENCE, &s).unwrap();
    assert_eq!(odd.op, LeaseOp::Unknown);
    // An expiry that is no number: the op is read, its ttl not.
    let Classified { op, ttl_ms, unread, .. } = classify(
        &record(
            &["EVAL", "return redis.call('pexpire', KEYS[1], ARGV[2])", "1", LEASE, "tok", "soon"],
            Some(Resp::Int(1)),
        ),
        LEASE,
        FENCE,
        &s,
    )
    .unwrap();
    assert_eq!((op, ttl_ms), (LeaseOp::Renew, None));
    assert!(unread.is_some());
    // A ttl that would overflow is refused, not wrapped.
    let big =
        classify(&record(&["SET", LEASE, "t", "NX", "EX", "18446744073709551615"], None), LEASE, FENCE, &s).unwrap();
    assert_eq!(big.ttl_ms, None);
}

#[test]
fn commands_on_other_keys_are_not_the_leases() {
    let s = Scripts::default();
    assert!(classify(&record(&["GET", "other"], None), LEASE, FENCE, &s).is_none());
    assert!(classify(&record(&["EVAL", RENEW, "1", "other", "tok", "1"], None), LEASE, FENCE, &s).is_none());
    assert!(classify(&record(&["PING"], None), LEASE, FENCE, &s).is_none());
    assert!(touches(&["GET".into(), LEASE.into()], LEASE, FENCE));
    assert!(touches(&["SCRIPT".into(), "LOAD".into(), "x".into()], LEASE, FENCE));
    assert!(!touches(&["GET".into(), "other".into()], LEASE, FENCE));
    // The key as a value is still a touch (the conservative direction: kept, then classified).
    assert!(!touches(&[LEASE.into()], LEASE, FENCE));
}
