//! What the two axum apps (axum_devices, bson_server) share on top of the neutral contract: the
//! common routes and headers, JSON error responses, and serving with the grace-period deadline.
//! Behind the `axum` feature so that hyper_hello and actix_matrix do not build axum for it.

use std::error::Error;
use std::io;

use ::axum::Router;
use ::axum::http::{HeaderValue, StatusCode, header};
use ::axum::middleware::map_response;
use ::axum::response::{IntoResponse, Response};
use ::axum::routing::get;
use ::axum::serve::ListenerExt;
use tokio::net::TcpListener;

use crate::{HEALTHZ_JSON, RequestError, ShutdownSignal, error_chain, error_json};

/// `routes` with what every axum app answers alike added: `GET /healthz`, JSON 404 and 405 (axum
/// adds the `Allow` header) and `Server: <server>` on every response, error responses included.
///
/// Call it after the app's last route: the 405 fallback covers only the routes added before it.
pub fn with_contract<S>(routes: Router<S>, server: &'static str) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    routes
        .route("/healthz", get(healthz))
        .fallback(|| async { RequestError::NotFound })
        .method_not_allowed_fallback(|| async { RequestError::MethodNotAllowed })
        .layer(map_response(move |mut response: Response| async move {
            response
                .headers_mut()
                .insert(header::SERVER, HeaderValue::from_static(server));
            response
        }))
}

async fn healthz() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], HEALTHZ_JSON)
}

/// The status of `error` as axum's type.
#[must_use]
pub fn status(error: &RequestError) -> StatusCode {
    // Every `RequestError::status` is a valid code; the fallback is never taken.
    StatusCode::from_u16(error.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

/// `status` with the body `{"error":"<error>"}`. The causes behind `error`, which the client is
/// not shown, go to stderr first as `<app>: <error>: <cause>: ...`.
#[must_use]
pub fn error_response(app: &str, status: StatusCode, error: &(dyn Error + 'static)) -> Response {
    if let Some(cause) = error.source() {
        eprintln!("{app}: {error}: {}", error_chain(cause));
    }
    json_error(status, &error.to_string())
}

fn json_error(status: StatusCode, reason: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        error_json(reason),
    )
        .into_response()
}

impl IntoResponse for RequestError {
    fn into_response(self) -> Response {
        json_error(status(&self), &self.to_string())
    }
}

/// Serves `router` on `listener` until `shutdown` fires, then lets in-flight requests finish
/// within [`crate::GRACE_PERIOD`]. `app` names the server in log lines.
///
/// # Errors
/// When serving fails.
pub async fn serve(
    app: &'static str,
    listener: TcpListener,
    router: Router,
    shutdown: ShutdownSignal,
) -> io::Result<()> {
    let listener = listener.tap_io(move |tcp| {
        // Small responses: do not let Nagle hold them back.
        if let Err(e) = tcp.set_nodelay(true) {
            eprintln!("{app}: cannot set TCP_NODELAY: {e}");
        }
    });
    let (trigger, deadline) = shutdown.with_deadline();
    let server = ::axum::serve(listener, router).with_graceful_shutdown(trigger);
    tokio::select! {
        result = server.into_future() => result,
        () = deadline => Ok(()),
    }
}
