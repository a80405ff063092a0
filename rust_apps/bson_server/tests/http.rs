//! bson_server's HTTP contract, driven through the router without opening a port.
#![allow(
    clippy::unwrap_used,
    reason = "helpers of tests: a failed unwrap is a failed test"
)]

use axum::body::{Body, Bytes};
use axum::http::{Method, Request, StatusCode, header};
use axum::response::Response;
use bson_server::{AppState, app};
use serde_json::{Value, json};
use tower::ServiceExt;

async fn send(state: &AppState, method: Method, uri: &str) -> Response {
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .body(Body::empty())
        .unwrap();
    app(state.clone()).oneshot(request).await.unwrap()
}

async fn body_of(response: Response) -> Bytes {
    axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap()
}

fn assert_json_with_server(response: &Response) {
    assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
    assert_eq!(response.headers()[header::SERVER], "bson_server");
}

#[tokio::test]
async fn every_path_answers_the_same_documents() {
    let state = AppState::new(3);
    let article = json!({"hello": "world", "anotherKey": "anotherValue", "number": 1234});
    for path in ["clone", "document", "raw", "raw_borrowed"] {
        let response = send(&state, Method::GET, &format!("/find?path={path}")).await;
        assert_eq!(response.status(), StatusCode::OK, "{path}");
        assert_json_with_server(&response);
        let docs: Value = serde_json::from_slice(&body_of(response).await).unwrap();
        assert_eq!(docs, json!([article, article, article]), "{path}");
    }
}

#[tokio::test]
async fn zero_documents_is_an_empty_array() {
    let response = send(&AppState::new(0), Method::GET, "/find?path=raw").await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(body_of(response).await, "[]");
}

#[tokio::test]
async fn missing_or_unknown_path_is_400() {
    let state = AppState::new(1);
    for uri in [
        "/find",
        "/find?",
        "/find?other=raw",
        "/find?path=",
        "/find?path=RAW",
        "/find?path=bogus",
    ] {
        let response = send(&state, Method::GET, uri).await;
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{uri}");
        assert_json_with_server(&response);
        let error: Value = serde_json::from_slice(&body_of(response).await).unwrap();
        assert!(error["error"].is_string(), "{uri}");
    }
}

#[tokio::test]
async fn healthz_404_and_405() {
    let state = AppState::new(1);
    let response = send(&state, Method::GET, "/healthz").await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(body_of(response).await, r#"{"status":"ok"}"#);

    let response = send(&state, Method::GET, "/nope").await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    assert_json_with_server(&response);
    assert_eq!(body_of(response).await, r#"{"error":"not found"}"#);

    let response = send(&state, Method::POST, "/find?path=raw").await;
    assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_json_with_server(&response);
    assert!(
        response.headers()[header::ALLOW]
            .to_str()
            .unwrap()
            .contains("GET")
    );
}
