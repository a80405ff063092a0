//! hyper_hello's whole HTTP surface as one pure function from request head to response, so the
//! tests exercise it without a socket and the server module only moves bytes.

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use server_common::{HEALTHZ_JSON, RequestError};

/// The `Server` header value on every response.
pub const SERVER_NAME: &str = "hyper_hello";
/// What `GET /` answers.
pub const HELLO: &str = "Hello, World!";
/// The methods every route takes (hyper leaves the body out of HEAD answers itself).
const ALLOW: &str = "GET, HEAD";

/// Answers one request; only the method and path matter.
#[must_use]
pub fn respond<B>(request: &Request<B>) -> Response<Full<Bytes>> {
    route(request).unwrap_or_else(|error| error_response(&error))
}

/// The page, or the request error (404 or 405) that keeps the request from it.
fn route<B>(request: &Request<B>) -> Result<Response<Full<Bytes>>, RequestError> {
    let (content_type, body) = match request.uri().path() {
        "/" => ("text/plain; charset=utf-8", HELLO),
        "/healthz" => ("application/json", HEALTHZ_JSON),
        _ => return Err(RequestError::NotFound),
    };
    if !matches!(*request.method(), Method::GET | Method::HEAD) {
        return Err(RequestError::MethodNotAllowed);
    }
    Ok(reply(StatusCode::OK, content_type, body))
}

/// The JSON error response for `error`, with `Allow` on the 405.
fn error_response(error: &RequestError) -> Response<Full<Bytes>> {
    // Every `RequestError::status` is a valid code; the fallback is never taken.
    let status = StatusCode::from_u16(error.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = server_common::error_json(&error.to_string());
    let mut response = reply(status, "application/json", body);
    if *error == RequestError::MethodNotAllowed {
        response
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static(ALLOW));
    }
    response
}

/// A response with the headers every answer carries; hyper adds `Date` and `Content-Length`.
fn reply(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(header::SERVER, HeaderValue::from_static(SERVER_NAME));
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;

    use super::*;

    fn request(method: Method, uri: &str) -> Request<()> {
        Request::builder().method(method).uri(uri).body(()).unwrap()
    }

    async fn body(response: Response<Full<Bytes>>) -> Bytes {
        response.into_body().collect().await.unwrap().to_bytes()
    }

    #[tokio::test]
    async fn hello_is_plain_text() {
        let response = respond(&request(Method::GET, "/"));
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(
            response.headers()[header::CONTENT_TYPE],
            "text/plain; charset=utf-8"
        );
        assert_eq!(response.headers()[header::SERVER], "hyper_hello");
        assert_eq!(body(response).await, "Hello, World!");
    }

    #[tokio::test]
    async fn query_strings_do_not_change_the_route() {
        assert_eq!(
            respond(&request(Method::GET, "/?x=1")).status(),
            StatusCode::OK
        );
    }

    #[tokio::test]
    async fn healthz_is_ok() {
        let response = respond(&request(Method::GET, "/healthz"));
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
        assert_eq!(body(response).await, r#"{"status":"ok"}"#);
    }

    #[tokio::test]
    async fn unknown_path_is_404_json() {
        let response = respond(&request(Method::GET, "/nope"));
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
        assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
        assert_eq!(response.headers()[header::SERVER], "hyper_hello");
        assert_eq!(body(response).await, r#"{"error":"not found"}"#);
    }

    #[tokio::test]
    async fn wrong_method_is_405_with_allow() {
        for path in ["/", "/healthz"] {
            let response = respond(&request(Method::POST, path));
            assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
            assert_eq!(response.headers()[header::ALLOW], "GET, HEAD");
            assert_eq!(body(response).await, r#"{"error":"method not allowed"}"#);
        }
    }
}
