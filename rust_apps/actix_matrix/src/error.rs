//! The one error type of actix_matrix; actix turns it into a JSON `{"error": ...}` response
//! through `ResponseError`, so handlers just return `Result<_, AppError>`.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use server_common::RequestError;

/// Everything that can go wrong while answering a request: only what every app answers alike
/// (bad JSON, a missing, wrong-typed or out-of-range `n`, an oversized or broken body, an unknown
/// path or method). actix leaves the 405's `Allow` header to the route (`lib.rs`).
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct AppError(#[from] RequestError);

impl ResponseError for AppError {
    fn status_code(&self) -> StatusCode {
        // Every `RequestError::status` is a valid code; the fallback is never taken.
        StatusCode::from_u16(self.0.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    fn error_response(&self) -> HttpResponse {
        HttpResponse::build(self.status_code())
            .content_type("application/json")
            .body(server_common::error_json(&self.to_string()))
    }
}
