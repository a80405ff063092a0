//! actix_matrix: the CPU-bound point of polyperf, naive matrix multiplication behind actix-web.
//! `app` builds the service (tests drive it with `actix_web::test`); `run` serves it; `bench`
//! times the multiply alone in the same binary.

pub mod bench;
pub mod error;
pub mod matrix;

use std::io;
use std::num::NonZeroUsize;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceFactory, ServiceRequest, ServiceResponse};
use actix_web::http::header::{self, HeaderValue};
use actix_web::middleware::DefaultHeaders;
use actix_web::{App, HttpRequest, HttpResponse, HttpServer, ResponseError, web};
use serde::{Deserialize, Serialize};
use server_common::{GRACE_PERIOD, HEALTHZ_JSON, RequestError, ServeArgs, ShutdownSignal};

use crate::error::AppError;
use crate::matrix::{Matrix, multiply};

/// The `Server` header value on every response.
pub const SERVER_NAME: &str = "actix_matrix";
/// Largest accepted request body.
pub const BODY_LIMIT: usize = 1024;
/// Largest accepted `n`.
pub const MAX_N: u64 = 512;

/// `actix_matrix`: POST {"n": N} multiplies two random N×N matrices.
#[derive(Debug, Clone, clap::Parser)]
#[command(name = "actix_matrix", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub serve: ServeArgs,
}

/// What to do instead of serving.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum Command {
    /// Time the multiply alone (no server), one JSON line per round on stdout.
    Bench(bench::BenchArgs),
}

/// The whole HTTP surface of actix_matrix.
pub fn app() -> App<
    impl ServiceFactory<
        ServiceRequest,
        Config = (),
        Response = ServiceResponse<impl MessageBody>,
        Error = actix_web::Error,
        InitError = (),
    >,
> {
    App::new()
        .wrap(DefaultHeaders::new().add((header::SERVER, SERVER_NAME)))
        .service(
            web::resource("/healthz")
                .route(web::get().to(healthz))
                .default_service(web::to(|| not_allowed("GET"))),
        )
        .service(
            web::resource("/matrix-multiplication")
                .route(web::post().to(multiply_random))
                .default_service(web::to(|| not_allowed("POST"))),
        )
        .default_service(web::to(|| async {
            AppError::from(RequestError::NotFound).error_response()
        }))
}

/// The 405 for a resource that takes only `allow`.
async fn not_allowed(allow: &'static str) -> HttpResponse {
    let mut response = AppError::from(RequestError::MethodNotAllowed).error_response();
    response
        .headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static(allow));
    response
}

async fn healthz() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/json")
        .body(HEALTHZ_JSON)
}

#[derive(Debug, Deserialize)]
struct MatrixRequest {
    n: u64,
}

#[derive(Debug, Serialize)]
struct MatrixResponse {
    n: usize,
    product: Matrix,
}

async fn multiply_random(
    request: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, AppError> {
    let body = read_limited(&request, payload).await?;
    let n = parse_n(&body)?;
    // Computed on the worker thread, as the other languages' servers do: the benchmark measures
    // the multiplication under the server's own concurrency model.
    let mut rng = fastrand::Rng::new();
    let a = Matrix::random(n, &mut rng);
    let b = Matrix::random(n, &mut rng);
    let product = multiply(&a, &b).map_err(|e| RequestError::BadRequest(e.to_string()))?;
    Ok(HttpResponse::Ok().json(MatrixResponse {
        n: n.get(),
        product,
    }))
}

async fn read_limited(
    request: &HttpRequest,
    payload: web::Payload,
) -> Result<web::Bytes, RequestError> {
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    if declared.is_some_and(|len| len > BODY_LIMIT as u64) {
        return Err(RequestError::PayloadTooLarge { limit: BODY_LIMIT });
    }
    match payload.to_bytes_limited(BODY_LIMIT).await {
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(_)) => Err(RequestError::BodyRead),
        Err(_) => Err(RequestError::PayloadTooLarge { limit: BODY_LIMIT }),
    }
}

/// `n` from a `{"n": N}` body, 1 ≤ N ≤ 512.
///
/// # Errors
/// [`RequestError::BadRequest`] naming the problem.
pub fn parse_n(body: &[u8]) -> Result<NonZeroUsize, RequestError> {
    let request: MatrixRequest = server_common::json_object(body)?;
    Some(request.n)
        .filter(|n| (1..=MAX_N).contains(n))
        .and_then(|n| usize::try_from(n).ok())
        .and_then(NonZeroUsize::new)
        .ok_or_else(|| RequestError::BadRequest(format!("n must be between 1 and {MAX_N}")))
}

/// Binds, announces and serves on `--workers` actix workers until SIGTERM/SIGINT, then lets
/// in-flight requests finish within the grace period.
///
/// # Errors
/// When the signal handlers or the socket cannot be set up, or the server fails.
pub fn run(cli: &Cli) -> io::Result<()> {
    actix_web::rt::System::new().block_on(async {
        let shutdown = ShutdownSignal::install()?;
        let server = HttpServer::new(app)
            .workers(cli.serve.workers.get())
            // Our own handler, so SIGINT is as graceful as SIGTERM (actix's would force-stop).
            .disable_signals()
            .shutdown_timeout(GRACE_PERIOD.as_secs())
            .bind((cli.serve.host.as_str(), cli.serve.port))
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("cannot bind {}:{}: {e}", cli.serve.host, cli.serve.port),
                )
            })?;
        let addr = server
            .addrs()
            .first()
            .copied()
            .ok_or_else(|| io::Error::other("bound no address"))?;
        server_common::announce(&cli.serve.host, addr);
        let server = server.run();
        let handle = server.handle();
        actix_web::rt::spawn(async move {
            shutdown.recv().await;
            handle.stop(true).await;
        });
        server.await
    })
}
