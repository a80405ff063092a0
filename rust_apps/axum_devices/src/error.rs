//! The one error type of axum_devices; every failure a request can meet becomes one of these and
//! then a JSON `{"error": ...}` response, so handlers never build error responses by hand.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use server_common::RequestError;

use crate::SERVER_NAME;

/// Everything that can go wrong while answering a request.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// What every app answers alike: a bad or oversized body, an unknown path or method (for the
    /// 405 axum adds the `Allow` header).
    #[error(transparent)]
    Request(#[from] RequestError),
    /// POST without `--database-url`.
    #[error("no database configured (--database-url)")]
    NoDatabase,
    /// No pooled connection could be had (database down, pool exhausted past the wait timeout).
    #[error("database unavailable")]
    DbUnavailable(#[source] deadpool_postgres::PoolError),
    /// The database answered with an error.
    #[error("database error")]
    Db(#[source] tokio_postgres::Error),
}

impl AppError {
    fn status(&self) -> StatusCode {
        match self {
            Self::Request(e) => server_common::axum::status(e),
            Self::NoDatabase | Self::DbUnavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            // A dropped connection means the database went away, not that the query was wrong.
            Self::Db(e) if e.is_closed() => StatusCode::SERVICE_UNAVAILABLE,
            Self::Db(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        // The client gets a short reason; the log gets the database's cause. (A missing
        // database is configuration, said once at start, not per request.)
        server_common::axum::error_response(SERVER_NAME, self.status(), &self)
    }
}
