//! Reads a request body into memory without ever holding more than the limit, telling
//! "too large" (413) apart from "broken" (400).

use axum::body::{Body, Bytes, HttpBody};

use server_common::RequestError;

/// The whole body, or [`RequestError::PayloadTooLarge`] as soon as it is known to exceed `limit`.
///
/// # Errors
/// 413 past the limit (by `Content-Length` up front, or while reading a chunked body), 400 when
/// the body cannot be read.
pub async fn read_limited(body: Body, limit: usize) -> Result<Bytes, RequestError> {
    // hyper derives the size hint from Content-Length, so a declared oversize is refused unread.
    let declared = body.size_hint().lower();
    if usize::try_from(declared).map_or(true, |n| n > limit) {
        return Err(RequestError::PayloadTooLarge { limit });
    }
    axum::body::to_bytes(body, limit).await.map_err(|e| {
        let inner = e.into_inner();
        if is_length_limit(inner.as_ref()) {
            RequestError::PayloadTooLarge { limit }
        } else {
            RequestError::BodyRead
        }
    })
}

fn is_length_limit(mut error: &(dyn std::error::Error + 'static)) -> bool {
    loop {
        if error.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        match error.source() {
            Some(next) => error = next,
            None => return false,
        }
    }
}
