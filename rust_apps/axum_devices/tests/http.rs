//! axum_devices' HTTP contract, driven through the router without opening a port.
#![allow(
    clippy::unwrap_used,
    reason = "helpers of tests: a failed unwrap is a failed test"
)]

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{Method, Request, StatusCode, header};
use axum::response::Response;
use axum_devices::{AppState, BODY_LIMIT, app};
use tower::ServiceExt;

fn router() -> Router {
    app(AppState::new(None))
}

async fn send(method: Method, uri: &str, body: impl Into<Body>) -> Response {
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .body(body.into())
        .unwrap();
    router().oneshot(request).await.unwrap()
}

async fn body_of(response: Response) -> Bytes {
    axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap()
}

async fn json_of(response: Response) -> serde_json::Value {
    serde_json::from_slice(&body_of(response).await).unwrap()
}

fn assert_json_with_server(response: &Response) {
    assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
    assert_eq!(response.headers()[header::SERVER], "axum_devices");
}

#[tokio::test]
async fn healthz_is_ok() {
    let response = send(Method::GET, "/healthz", Body::empty()).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_json_with_server(&response);
    assert_eq!(body_of(response).await, r#"{"status":"ok"}"#);
}

#[tokio::test]
async fn lists_exactly_the_fixed_devices() {
    let response = send(Method::GET, "/api/devices", Body::empty()).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_json_with_server(&response);
    let expected = concat!(
        r#"[{"id":1,"mac":"5F-33-CC-1F-43-82","firmware":"2.1.6"},"#,
        r#"{"id":2,"mac":"EF-2B-C4-F5-D6-34","firmware":"2.1.5"},"#,
        r#"{"id":3,"mac":"62-46-13-B7-B3-A1","firmware":"3.0.0"},"#,
        r#"{"id":4,"mac":"96-A8-DE-5B-77-14","firmware":"1.0.1"},"#,
        r#"{"id":5,"mac":"7E-3B-62-A6-09-12","firmware":"3.5.6"}]"#,
    );
    assert_eq!(body_of(response).await, expected);
}

#[tokio::test]
async fn valid_post_without_database_is_503() {
    let response = send(
        Method::POST,
        "/api/devices",
        r#"{"mac":"5F-33-CC-1F-43-82","firmware":"2.1.6"}"#,
    )
    .await;
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_json_with_server(&response);
    assert_eq!(
        json_of(response).await["error"],
        "no database configured (--database-url)"
    );
}

#[tokio::test]
async fn invalid_posts_are_400() {
    let cases = [
        "",
        "not json",
        "{",
        r#"[1,2]"#,
        r#"{"mac":"5F-33-CC-1F-43-82"}"#,
        r#"{"firmware":"2.1.6"}"#,
        r#"{"mac":5,"firmware":"2.1.6"}"#,
        r#"{"mac":"5F","firmware":2.1}"#,
        r#"{"mac":"","firmware":"2.1.6"}"#,
        r#"{"mac":"5F","firmware":""}"#,
        r#"{"mac":"5F-33-CC-1F-43-82-00","firmware":"2.1.6"}"#,
        r#"{"mac":"5F","firmware":"2.1.6-beta.1"}"#,
    ];
    for body in cases {
        let response = send(Method::POST, "/api/devices", body).await;
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "body {body:?}");
        assert_json_with_server(&response);
        let reason = json_of(response).await["error"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(!reason.is_empty(), "body {body:?}");
    }
}

#[tokio::test]
async fn oversized_body_is_413() {
    let big = format!(
        r#"{{"mac":"5F","firmware":"1","pad":"{}"}}"#,
        "x".repeat(BODY_LIMIT)
    );
    let response = send(Method::POST, "/api/devices", big).await;
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert_json_with_server(&response);
}

#[tokio::test]
async fn oversized_streamed_body_is_413() {
    // No size hint up front: the limit must trip while reading.
    let chunks = (0..4).map(|_| Ok::<_, std::io::Error>(vec![b' '; BODY_LIMIT / 2]));
    let body = Body::from_stream(futures_util::stream::iter(chunks));
    let response = send(Method::POST, "/api/devices", body).await;
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
}

#[tokio::test]
async fn unknown_path_is_404_json() {
    let response = send(Method::GET, "/nope", Body::empty()).await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    assert_json_with_server(&response);
    assert_eq!(body_of(response).await, r#"{"error":"not found"}"#);
}

#[tokio::test]
async fn wrong_method_is_405_with_allow() {
    let response = send(Method::DELETE, "/api/devices", Body::empty()).await;
    assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_json_with_server(&response);
    let allow = response.headers()[header::ALLOW]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(allow.contains("GET") && allow.contains("POST"), "{allow}");
    assert_eq!(json_of(response).await["error"], "method not allowed");

    let response = send(Method::POST, "/healthz", Body::empty()).await;
    assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert!(response.headers().contains_key(header::ALLOW));
}
