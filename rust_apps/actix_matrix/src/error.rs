//! The one error type of actix_matrix; actix turns it into a JSON `{"error": ...}` response
//! through `ResponseError`, so handlers just return `Result<_, AppError>`.

use actix_web::http::{StatusCode, header};
use actix_web::{HttpResponse, ResponseError};

/// Everything that can go wrong while answering a request.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// Bad JSON, a missing or wrong-typed `n`, or `n` out of range.
    #[error("{0}")]
    BadRequest(String),
    /// The body is over the limit.
    #[error("request body over {limit} bytes")]
    PayloadTooLarge { limit: usize },
    /// The body could not be read.
    #[error("cannot read request body")]
    BodyRead,
    /// No route for this path.
    #[error("not found")]
    NotFound,
    /// The path exists but not for this method.
    #[error("method not allowed")]
    MethodNotAllowed { allow: &'static str },
}

impl ResponseError for AppError {
    fn status_code(&self) -> StatusCode {
        match self {
            Self::BadRequest(_) | Self::BodyRead => StatusCode::BAD_REQUEST,
            Self::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::NotFound => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
        }
    }

    fn error_response(&self) -> HttpResponse {
        let mut response = HttpResponse::build(self.status_code());
        if let Self::MethodNotAllowed { allow } = self {
            response.insert_header((header::ALLOW, *allow));
        }
        response
            .content_type("application/json")
            .body(server_common::error_json(&self.to_string()))
    }
}
