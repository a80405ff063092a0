//! The error side of the contract, framework-neutral: the request errors every app answers alike,
//! their JSON body, and the strict JSON-object body parse. Each app turns these into a response
//! with its own framework (the axum apps through `crate::axum`).

use std::error::Error;

use serde::de::DeserializeOwned;

/// The request failures every server answers the same way: one status, one short reason each.
///
/// Apps wrap it in their own error type next to their app-specific failures. The 405 carries no
/// `Allow` list: axum adds that header itself, actix_matrix and hyper_hello add their own.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// The body or the query is not what the route wants; the text says what.
    #[error("{0}")]
    BadRequest(String),
    /// The body is over the limit.
    #[error("request body over {limit} bytes")]
    PayloadTooLarge { limit: usize },
    /// The body could not be read (client went away, broken chunking).
    #[error("cannot read request body")]
    BodyRead,
    /// No route for this path.
    #[error("not found")]
    NotFound,
    /// The path exists but not for this method.
    #[error("method not allowed")]
    MethodNotAllowed,
}

impl RequestError {
    /// The HTTP status code, as a number so that each framework's `StatusCode` can take it.
    #[must_use]
    pub const fn status(&self) -> u16 {
        match self {
            Self::BadRequest(_) | Self::BodyRead => 400,
            Self::PayloadTooLarge { .. } => 413,
            Self::NotFound => 404,
            Self::MethodNotAllowed => 405,
        }
    }
}

/// `T` from a request body that must be a JSON object.
///
/// # Errors
/// [`RequestError::BadRequest`] when the body is not an object or does not deserialize as `T`.
pub fn json_object<T: DeserializeOwned>(body: &[u8]) -> Result<T, RequestError> {
    // serde's derive would also take an array (`["mac","fw"]`, `[3]`) as a struct; the contract
    // wants an object.
    if body.trim_ascii_start().first() != Some(&b'{') {
        return Err(RequestError::BadRequest(
            "body must be a JSON object".to_owned(),
        ));
    }
    serde_json::from_slice(body)
        .map_err(|e| RequestError::BadRequest(format!("invalid JSON body: {e}")))
}

/// `{"error":"<reason>"}`, the body of every error response.
#[must_use]
pub fn error_json(reason: &str) -> String {
    serde_json::json!({ "error": reason }).to_string()
}

/// An error and all its causes on one line, `outer: inner: innermost`, for logs and start-up
/// messages (many library errors print only their outermost layer).
#[must_use]
pub fn error_chain(error: &(dyn Error + 'static)) -> String {
    let mut line = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        // Some wrappers already repeat their cause in their own message.
        if !line.ends_with(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        source = cause.source();
    }
    line
}

#[cfg(test)]
mod tests {
    use std::io;

    use super::*;

    #[test]
    fn error_chain_joins_causes() {
        let inner = io::Error::new(io::ErrorKind::ConnectionRefused, "refused");
        let outer = io::Error::other(Wrapper(inner));
        assert_eq!(error_chain(&outer), "cannot connect: refused");
    }

    #[derive(Debug)]
    struct Wrapper(io::Error);
    impl std::fmt::Display for Wrapper {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("cannot connect")
        }
    }
    impl Error for Wrapper {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn error_json_escapes_the_reason() {
        assert_eq!(error_json("bad \"n\""), r#"{"error":"bad \"n\""}"#);
    }

    #[test]
    fn request_errors_keep_their_status_and_reason() {
        let cases = [
            (RequestError::BadRequest("bad n".to_owned()), 400, "bad n"),
            (
                RequestError::PayloadTooLarge { limit: 1024 },
                413,
                "request body over 1024 bytes",
            ),
            (RequestError::BodyRead, 400, "cannot read request body"),
            (RequestError::NotFound, 404, "not found"),
            (RequestError::MethodNotAllowed, 405, "method not allowed"),
        ];
        for (error, status, reason) in cases {
            assert_eq!(
                (error.status(), error.to_string().as_str()),
                (status, reason)
            );
        }
    }

    #[derive(Debug, serde::Deserialize)]
    struct N {
        n: u32,
    }

    fn reason(body: &str) -> String {
        match json_object::<N>(body.as_bytes()) {
            Err(RequestError::BadRequest(reason)) => reason,
            other => panic!("expected a 400 for {body}, got {other:?}"),
        }
    }

    #[test]
    fn json_object_wants_an_object() {
        assert_eq!(json_object::<N>(b" {\"n\": 3}").unwrap().n, 3);
        assert_eq!(reason(""), "body must be a JSON object");
        assert_eq!(reason("[3]"), "body must be a JSON object");
        assert!(reason("{").starts_with("invalid JSON body: "));
        assert!(reason(r#"{"n":"3"}"#).starts_with("invalid JSON body: "));
    }
}
