use super::{calls, compared_argv, literal_returns, Arg, Call};

fn lit(s: &str) -> Arg {
    Arg::Lit(s.into())
}

#[test]
fn calls_are_read_with_their_keys_arguments_and_literal_options() {
    let src = "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then\n\
               return {1, redis.call(\"incr\", KEYS[2])} end return {0, redis.pcall('PTTL', KEYS[1])}";
    let got = calls(src);
    assert_eq!(
        got,
        vec![
            Call { cmd: "SET".into(), args: vec![Arg::Key(1), Arg::Argv(1), lit("NX"), lit("PX"), Arg::Argv(2)] },
            Call { cmd: "INCR".into(), args: vec![Arg::Key(2)] },
            Call { cmd: "PTTL".into(), args: vec![Arg::Key(1)] },
        ]
    );
    assert!(got[0].on(1) && got[0].has("NX") && got[0].after("PX") == Some(&Arg::Argv(2)));
}

#[test]
fn wrapped_and_computed_arguments_are_told_apart() {
    let got = calls("redis.call('pexpire', KEYS[1], tonumber(ARGV[3])) redis.call('expire', KEYS[1], ttl + 1)");
    assert_eq!(got[0].args, vec![Arg::Key(1), Arg::Argv(3)]);
    assert_eq!(got[1].args, vec![Arg::Key(1), Arg::Expr]);
}

#[test]
fn a_quote_or_parenthesis_inside_a_string_does_not_end_the_call() {
    let got = calls("redis.call('set', KEYS[1], 'a,b)c', 'PX', ARGV[2]) redis.call('del', KEYS[1])");
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].args[1], lit("A,B)C"));
    assert_eq!(got[1].cmd, "DEL");
}

#[test]
fn an_unclosed_call_ends_the_reading_without_panicking() {
    assert!(calls("redis.call('get', KEYS[1]").is_empty());
    assert!(calls("redis.call").is_empty());
    assert!(calls("").is_empty());
}

#[test]
fn the_compared_argument_is_the_token() {
    assert_eq!(compared_argv("if redis.call('get', KEYS[1]) == ARGV[1] then"), Some(1));
    assert_eq!(compared_argv("local v = redis.call('get', KEYS[1])\nif v ~= ARGV[2] then return 1 end"), Some(2));
    assert_eq!(compared_argv("if ARGV[3] == redis.call('get', KEYS[1]) then"), Some(3));
    assert_eq!(compared_argv("return redis.call('del', KEYS[1])"), None);
}

#[test]
fn literal_returns_are_read_only_from_a_refusing_compare() {
    // The refused branch returns 1, the work's branch ends in 0 (inverted, as some libraries do).
    let inverted = "if redis.call('get', KEYS[1]) ~= ARGV[1] then\n  return 1\nelse\n  redis.call('del', KEYS[1])\n  return 0\nend";
    assert_eq!(literal_returns(inverted), Some((1, 0)));
    let plain = "if not t or t ~= ARGV[1] then return 0 end redis.call('pexpire', KEYS[1], ARGV[2]) return 1";
    assert_eq!(literal_returns(plain), Some((0, 1)));
    // A script that returns the command's own reply has no literals of its own.
    assert_eq!(
        literal_returns("if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"),
        None
    );
}
