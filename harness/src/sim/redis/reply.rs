//! A Redis reply as the model builds it, encoded as RESP2 bytes and handed to redis-rs through its
//! own parser, so that a client reads the model's replies exactly as it reads a server's.

/// One reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// `+...` (e.g. `OK`, `PONG`).
    Status(String),
    /// `-CODE message`: the whole line after the `-`.
    Error(String),
    /// `:n`.
    Int(i64),
    /// `$n` bytes.
    Bulk(Vec<u8>),
    /// `$-1`.
    Nil,
    /// `*n` replies.
    Array(Vec<Reply>),
    /// `*-1`.
    NilArray,
}

impl Reply {
    /// `+OK`.
    #[must_use]
    pub fn ok() -> Self {
        Self::Status("OK".into())
    }

    /// An `ERR` error with `message`.
    #[must_use]
    pub fn err(message: &str) -> Self {
        Self::Error(format!("ERR {message}"))
    }

    /// A bulk reply of `text`.
    #[must_use]
    pub fn bulk(text: impl AsRef<[u8]>) -> Self {
        Self::Bulk(text.as_ref().to_vec())
    }

    /// The reply's first word when it is an error (`ERR`, `NOSCRIPT`, `WRONGTYPE`).
    #[must_use]
    pub fn error_code(&self) -> Option<&str> {
        match self {
            Self::Error(e) => e.split_whitespace().next(),
            _ => None,
        }
    }

    /// The RESP2 encoding.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Self::Status(s) => line(out, b'+', s.as_bytes()),
            Self::Error(e) => line(out, b'-', e.as_bytes()),
            Self::Int(n) => line(out, b':', n.to_string().as_bytes()),
            Self::Bulk(b) => {
                line(out, b'$', b.len().to_string().as_bytes());
                out.extend_from_slice(b);
                out.extend_from_slice(b"\r\n");
            }
            Self::Nil => out.extend_from_slice(b"$-1\r\n"),
            Self::Array(items) => {
                line(out, b'*', items.len().to_string().as_bytes());
                for i in items {
                    i.encode(out);
                }
            }
            Self::NilArray => out.extend_from_slice(b"*-1\r\n"),
        }
    }

    /// What redis-rs makes of it: its own parser for errors (so they become its server errors,
    /// `NOSCRIPT` and all) and nil arrays; the plain kinds built directly, as that parser builds
    /// them (a test compares the two on every kind).
    #[must_use]
    pub fn to_value(&self) -> redis::Value {
        use redis::Value as V;
        match self {
            Self::Int(n) => V::Int(*n),
            Self::Nil => V::Nil,
            Self::Bulk(b) => V::BulkString(b.clone()),
            Self::Status(s) if s == "OK" => V::Okay,
            Self::Status(s) => V::SimpleString(s.clone()),
            Self::Array(items) if !items.iter().any(|i| matches!(i, Self::Error(_) | Self::NilArray)) => {
                V::Array(items.iter().map(Self::to_value).collect())
            }
            Self::Error(_) | Self::NilArray | Self::Array(_) => self.parsed(),
        }
    }

    /// What redis-rs's parser makes of the reply's RESP2 bytes.
    #[must_use]
    pub fn parsed(&self) -> redis::Value {
        let mut bytes = Vec::new();
        self.encode(&mut bytes);
        // Status and error lines cannot hold a line break: the model never builds one.
        redis::parse_redis_value(&bytes).unwrap_or(redis::Value::Nil)
    }

    /// The reply redis-rs parsed from a server, in the model's terms (for comparing the two).
    #[must_use]
    pub fn from_value(v: &redis::Value) -> Self {
        use redis::Value as V;
        match v {
            V::Nil => Self::Nil,
            V::Int(n) => Self::Int(*n),
            V::BulkString(b) => Self::Bulk(b.clone()),
            V::Array(items) => Self::Array(items.iter().map(Self::from_value).collect()),
            V::SimpleString(s) => Self::Status(s.clone()),
            V::Okay => Self::ok(),
            V::ServerError(e) => {
                Self::Error(format!("{} {}", e.code(), e.details().unwrap_or_default()).trim_end().to_owned())
            }
            other => Self::Error(format!("MODEL cannot compare {other:?}")),
        }
    }
}

fn line(out: &mut Vec<u8>, kind: u8, body: &[u8]) {
    out.push(kind);
    out.extend_from_slice(body);
    out.extend_from_slice(b"\r\n");
}
