//! axum_devices: a fixed JSON device list and a Postgres-backed insert, the "framework + pool"
//! point of polyperf. `app` builds the router (tests call it without a port); `run` serves it.

mod body;
pub mod cli;
pub mod db;
pub mod devices;
pub mod error;

use std::io;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use server_common::ShutdownSignal;

use crate::cli::Cli;
use crate::db::Db;
use crate::devices::{Device, NewDevice};
use crate::error::AppError;

/// The `Server` header value on every response.
pub const SERVER_NAME: &str = "axum_devices";
/// Largest accepted request body.
pub const BODY_LIMIT: usize = 1024;

/// Why the server could not start (or stopped with an I/O error).
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot start the runtime: {0}")]
    Runtime(#[source] io::Error),
    #[error("cannot install signal handlers: {0}")]
    Signals(#[source] io::Error),
    #[error("{0}")]
    Database(String),
    #[error("{0}")]
    Bind(#[source] io::Error),
    #[error("server failed: {0}")]
    Serve(#[source] io::Error),
}

/// What handlers share: the device list and, if configured, the database.
#[derive(Debug, Clone)]
pub struct AppState {
    devices: Arc<[Device]>,
    db: Option<Db>,
}

impl AppState {
    /// State for a server with or without a database.
    #[must_use]
    pub fn new(db: Option<Db>) -> Self {
        Self {
            devices: devices::fixed_devices().into(),
            db,
        }
    }
}

/// The whole HTTP surface of axum_devices.
pub fn app(state: AppState) -> Router {
    let routes = Router::new().route("/api/devices", get(list_devices).post(create_device));
    server_common::axum::with_contract(routes, SERVER_NAME).with_state(state)
}

async fn list_devices(State(state): State<AppState>) -> Json<Arc<[Device]>> {
    Json(Arc::clone(&state.devices))
}

async fn create_device(
    State(state): State<AppState>,
    body: Body,
) -> Result<(StatusCode, Json<Device>), AppError> {
    let bytes = body::read_limited(body, BODY_LIMIT).await?;
    // Validate before looking for a database: a bad body is a 400 whatever the configuration.
    let new = NewDevice::from_json(&bytes)?;
    let db = state.db.as_ref().ok_or(AppError::NoDatabase)?;
    let device = db.insert(new).await?;
    Ok((StatusCode::CREATED, Json(device)))
}

/// Starts the runtime, connects the database if asked, binds, announces and serves until
/// SIGTERM/SIGINT.
///
/// # Errors
/// Any [`StartError`]; the caller prints it and exits non-zero.
pub fn run(cli: &Cli) -> Result<(), StartError> {
    let runtime =
        server_common::multi_thread_runtime(cli.serve.workers).map_err(StartError::Runtime)?;
    runtime.block_on(serve(cli))
}

async fn serve(cli: &Cli) -> Result<(), StartError> {
    let shutdown = ShutdownSignal::install().map_err(StartError::Signals)?;
    let db = match cli.database_url() {
        Some(url) => Some(
            Db::connect(
                url,
                usize::from(cli.pool_size),
                cli.db_timeout(),
                &cli.table,
            )
            .await?,
        ),
        None => {
            eprintln!("axum_devices: no --database-url: POST /api/devices will answer 503");
            None
        }
    };
    let listener = server_common::bind(&cli.serve.host, cli.serve.port)
        .await
        .map_err(StartError::Bind)?;
    let addr = listener.local_addr().map_err(StartError::Bind)?;
    server_common::announce(&cli.serve.host, addr);
    server_common::axum::serve(SERVER_NAME, listener, app(AppState::new(db)), shutdown)
        .await
        .map_err(StartError::Serve)
}
