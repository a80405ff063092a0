//! actix_matrix's HTTP contract, driven through `actix_web::test` without opening a port.
#![allow(
    clippy::unwrap_used,
    reason = "helpers of tests: a failed unwrap is a failed test"
)]

use actix_matrix::{BODY_LIMIT, app};
use actix_web::http::{Method, StatusCode, header};
use actix_web::test::{self, TestRequest};
use serde_json::Value;

async fn call(request: TestRequest) -> (StatusCode, header::HeaderMap, actix_web::web::Bytes) {
    let service = test::init_service(app()).await;
    let response = test::call_service(&service, request.to_request()).await;
    let status = response.status();
    let headers = response.headers().clone();
    (status, headers, test::read_body(response).await)
}

fn hdr(headers: &header::HeaderMap, name: header::HeaderName) -> &str {
    headers.get(name).unwrap().to_str().unwrap()
}

fn post(body: &str) -> TestRequest {
    TestRequest::post()
        .uri("/matrix-multiplication")
        .set_payload(body.to_owned())
}

fn assert_json_error(status: StatusCode, headers: &header::HeaderMap, body: &[u8]) -> String {
    assert_eq!(
        hdr(headers, header::CONTENT_TYPE),
        "application/json",
        "{status}"
    );
    assert_eq!(hdr(headers, header::SERVER), "actix_matrix");
    let value: Value = serde_json::from_slice(body).unwrap();
    value["error"].as_str().unwrap().to_owned()
}

#[actix_web::test]
async fn healthz_is_ok() {
    let (status, headers, body) = call(TestRequest::get().uri("/healthz")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(hdr(&headers, header::CONTENT_TYPE), "application/json");
    assert_eq!(hdr(&headers, header::SERVER), "actix_matrix");
    assert_eq!(body, r#"{"status":"ok"}"#);
}

#[actix_web::test]
async fn multiplies_random_digit_matrices() {
    for n in [1_usize, 3, 16] {
        let (status, headers, body) = call(post(&format!(r#"{{"n":{n}}}"#))).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(hdr(&headers, header::CONTENT_TYPE), "application/json");
        let value: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(value["n"], n);
        let rows = value["product"].as_array().unwrap();
        assert_eq!(rows.len(), n);
        for row in rows {
            let row = row.as_array().unwrap();
            assert_eq!(row.len(), n);
            // Each cell sums n products of two digits.
            let bound = 81 * i64::try_from(n).unwrap();
            assert!(
                row.iter()
                    .all(|v| (0..=bound).contains(&v.as_i64().unwrap()))
            );
        }
    }
}

#[actix_web::test]
async fn largest_n_is_accepted() {
    let (status, _, body) = call(post(r#"{"n":512}"#)).await;
    assert_eq!(status, StatusCode::OK);
    let value: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(value["product"].as_array().unwrap().len(), 512);
}

#[actix_web::test]
async fn bad_bodies_and_out_of_range_n_are_400() {
    let cases = [
        "",
        "nope",
        "{",
        "[3]",
        "{}",
        r#"{"m":3}"#,
        r#"{"n":0}"#,
        r#"{"n":513}"#,
        r#"{"n":-1}"#,
        r#"{"n":2.5}"#,
        r#"{"n":"3"}"#,
        r#"{"n":null}"#,
        r#"{"n":true}"#,
        r#"{"n":1e2}"#,
        r#"{"n":18446744073709551616}"#,
    ];
    for body in cases {
        let (status, headers, bytes) = call(post(body)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "body {body:?}");
        assert!(!assert_json_error(status, &headers, &bytes).is_empty());
    }
    let (status, headers, bytes) = call(post(r#"{"n":513}"#)).await;
    assert_eq!(
        assert_json_error(status, &headers, &bytes),
        "n must be between 1 and 512"
    );
}

#[actix_web::test]
async fn oversized_body_is_413() {
    let body = format!(r#"{{"n":2,"pad":"{}"}}"#, "x".repeat(BODY_LIMIT));
    let (status, headers, bytes) = call(post(&body)).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_json_error(status, &headers, &bytes);
}

#[actix_web::test]
async fn unknown_path_is_404_json() {
    let (status, headers, bytes) = call(TestRequest::get().uri("/nope")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(assert_json_error(status, &headers, &bytes), "not found");
}

#[actix_web::test]
async fn wrong_method_is_405_with_allow() {
    let request = TestRequest::get().uri("/matrix-multiplication");
    let (status, headers, bytes) = call(request).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(hdr(&headers, header::ALLOW), "POST");
    assert_eq!(
        assert_json_error(status, &headers, &bytes),
        "method not allowed"
    );

    let (status, headers, _) =
        call(TestRequest::default().method(Method::PUT).uri("/healthz")).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(hdr(&headers, header::ALLOW), "GET");
}
