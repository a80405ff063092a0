//! bson_server: the BSON article's deserialization paths as an HTTP endpoint. One find reply is
//! encoded at start (bson_paths::encode_reply); `GET /find?path=...` deserializes it per request
//! by that path and answers the documents as JSON. `app` builds the router; `run` serves it.

pub mod error;

use std::io;
use std::str::FromStr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{Uri, header};
use axum::response::IntoResponse;
use axum::routing::get;
use bson_paths::DeserializePath;
use serde::Deserialize;
use server_common::{RequestError, ServeArgs, ShutdownSignal};

use crate::error::AppError;

/// The `Server` header value on every response.
pub const SERVER_NAME: &str = "bson_server";

/// `bson_server`: GET /find?path=clone|document|raw|raw_borrowed.
#[derive(Debug, Clone, clap::Parser)]
#[command(name = "bson_server", version, about)]
pub struct Cli {
    #[command(flatten)]
    pub serve: ServeArgs,
    /// Documents in the pre-encoded find reply.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
    pub documents: u32,
}

/// The reply every request deserializes, encoded once.
#[derive(Debug, Clone)]
pub struct AppState {
    reply: Arc<[u8]>,
}

impl AppState {
    /// Encodes a find reply with `documents` article documents.
    #[must_use]
    pub fn new(documents: usize) -> Self {
        Self {
            reply: bson_paths::encode_reply(documents).into(),
        }
    }
}

/// The whole HTTP surface of bson_server.
pub fn app(state: AppState) -> Router {
    let routes = Router::new().route("/find", get(find));
    server_common::axum::with_contract(routes, SERVER_NAME).with_state(state)
}

#[derive(Debug, Deserialize)]
struct FindParams {
    path: Option<String>,
}

async fn find(State(state): State<AppState>, uri: Uri) -> Result<impl IntoResponse, AppError> {
    // Parsed by hand rather than by the `Query` extractor, whose rejection is plain text.
    let Query(params) = Query::<FindParams>::try_from_uri(&uri)
        .map_err(|e| RequestError::BadRequest(format!("bad query string: {e}")))?;
    let name = params
        .path
        .ok_or_else(|| RequestError::BadRequest("missing query parameter path".to_owned()))?;
    let path =
        DeserializePath::from_str(&name).map_err(|e| RequestError::BadRequest(e.to_string()))?;
    let json = bson_paths::documents_json(&state.reply, path).map_err(AppError::Deserialize)?;
    Ok(([(header::CONTENT_TYPE, "application/json")], json))
}

/// Encodes the reply, binds, announces and serves until SIGTERM/SIGINT.
///
/// # Errors
/// When the runtime, the signal handlers or the socket cannot be set up, or serving fails.
pub fn run(cli: &Cli) -> io::Result<()> {
    let state = AppState::new(cli.documents as usize);
    let runtime = server_common::multi_thread_runtime(cli.serve.workers)?;
    runtime.block_on(async {
        let shutdown = ShutdownSignal::install()?;
        let listener = server_common::bind(&cli.serve.host, cli.serve.port).await?;
        server_common::announce(&cli.serve.host, listener.local_addr()?);
        server_common::axum::serve(SERVER_NAME, listener, app(state), shutdown).await
    })
}
