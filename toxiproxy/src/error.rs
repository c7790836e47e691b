//! The API's errors, with Toxiproxy's messages and status codes, and the crate's client error.

/// An API error: the message and status Toxiproxy 2.12 answers with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// The body is not the JSON expected.
    #[error("bad request body: {0}")]
    BadRequestBody(String),
    /// A required field is empty or missing.
    #[error("missing required field: {0}")]
    MissingField(&'static str),
    /// No proxy by that name.
    #[error("proxy not found")]
    ProxyNotFound,
    /// A proxy by that name exists.
    #[error("proxy already exists")]
    ProxyAlreadyExists,
    /// `stream` is not `upstream` or `downstream`.
    #[error("stream was invalid, can be either upstream or downstream")]
    InvalidStream,
    /// `type` is not a known toxic.
    #[error("invalid toxic type")]
    InvalidToxicType,
    /// A toxic by that name exists on the proxy.
    #[error("toxic already exists")]
    ToxicAlreadyExists,
    /// No toxic by that name on the proxy.
    #[error("toxic not found")]
    ToxicNotFound,
    /// The listen address could not be bound (port in use, bad host).
    #[error("listen {addr}: {reason}")]
    Listen {
        /// The address asked for.
        addr: String,
        /// The operating system's answer.
        reason: String,
    },
}

impl ApiError {
    /// The HTTP status Toxiproxy uses for this error.
    #[must_use]
    pub fn status(&self) -> u16 {
        match self {
            ApiError::BadRequestBody(_)
            | ApiError::MissingField(_)
            | ApiError::InvalidStream
            | ApiError::InvalidToxicType => 400,
            ApiError::ProxyNotFound | ApiError::ToxicNotFound => 404,
            ApiError::ProxyAlreadyExists | ApiError::ToxicAlreadyExists => 409,
            ApiError::Listen { .. } => 500,
        }
    }

    /// The error body: `{"error": message, "status": code}`.
    #[must_use]
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({ "error": self.to_string(), "status": self.status() })
    }
}
