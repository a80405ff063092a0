//! The one error type of axum_devices; every failure a request can meet becomes one of these and
//! then a JSON `{"error": ...}` response, so handlers never build error responses by hand.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// Everything that can go wrong while answering a request.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// The body is not the JSON we want, or a value is out of range.
    #[error("{0}")]
    BadRequest(String),
    /// The body is over the limit.
    #[error("request body over {limit} bytes")]
    PayloadTooLarge { limit: usize },
    /// The body could not be read (client went away, broken chunking).
    #[error("cannot read request body")]
    BodyRead,
    /// POST without `--database-url`.
    #[error("no database configured (--database-url)")]
    NoDatabase,
    /// No pooled connection could be had (database down, pool exhausted past the wait timeout).
    #[error("database unavailable")]
    DbUnavailable(#[source] deadpool_postgres::PoolError),
    /// The database answered with an error.
    #[error("database error")]
    Db(#[source] tokio_postgres::Error),
    /// No route for this path.
    #[error("not found")]
    NotFound,
    /// The path exists but not for this method; axum adds the `Allow` header.
    #[error("method not allowed")]
    MethodNotAllowed,
}

impl AppError {
    fn status(&self) -> StatusCode {
        match self {
            Self::BadRequest(_) | Self::BodyRead => StatusCode::BAD_REQUEST,
            Self::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::NoDatabase | Self::DbUnavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            // A dropped connection means the database went away, not that the query was wrong.
            Self::Db(e) if e.is_closed() => StatusCode::SERVICE_UNAVAILABLE,
            Self::Db(_) => StatusCode::INTERNAL_SERVER_ERROR,
            Self::NotFound => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
        }
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let status = self.status();
        // The client gets a short reason; the log gets the database's cause. (A missing
        // database is configuration, said once at start, not per request.)
        if let Some(cause) = std::error::Error::source(&self) {
            eprintln!(
                "axum_devices: {self}: {}",
                server_common::error_chain(cause)
            );
        }
        let body = server_common::error_json(&self.to_string());
        let mut response = (status, body).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        response
    }
}
