//! The one error type of bson_server; each variant becomes a JSON `{"error": ...}` response.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// Everything that can go wrong while answering a request.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// No `path` query parameter, or one that names no deserialization path.
    #[error("{0}")]
    BadRequest(String),
    /// The pre-encoded reply did not deserialize: a bug in this server or in bson_paths.
    #[error("cannot deserialize the reply")]
    Deserialize(#[source] bson_paths::Error),
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
            Self::BadRequest(_) => StatusCode::BAD_REQUEST,
            Self::Deserialize(_) => StatusCode::INTERNAL_SERVER_ERROR,
            Self::NotFound => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
        }
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        if let Some(cause) = std::error::Error::source(&self) {
            eprintln!("bson_server: {self}: {}", server_common::error_chain(cause));
        }
        let body = server_common::error_json(&self.to_string());
        let mut response = (self.status(), body).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        response
    }
}
