//! The one error type of bson_server; each variant becomes a JSON `{"error": ...}` response.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use server_common::RequestError;

use crate::SERVER_NAME;

/// Everything that can go wrong while answering a request.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// What every app answers alike; here a missing or unknown `path` query parameter, an unknown
    /// path or method (for the 405 axum adds the `Allow` header).
    #[error(transparent)]
    Request(#[from] RequestError),
    /// The pre-encoded reply did not deserialize: a bug in this server or in bson_paths.
    #[error("cannot deserialize the reply")]
    Deserialize(#[source] bson_paths::Error),
}

impl AppError {
    fn status(&self) -> StatusCode {
        match self {
            Self::Request(e) => server_common::axum::status(e),
            Self::Deserialize(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        server_common::axum::error_response(SERVER_NAME, self.status(), &self)
    }
}
