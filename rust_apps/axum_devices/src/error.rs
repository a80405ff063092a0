//! The one error type of axum_devices; every failure a request can meet becomes one of these and
//! then a JSON `{"error": ...}` response, so handlers never build error responses by hand.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use server_common::RequestError;
use tokio_postgres::error::SqlState;

use crate::SERVER_NAME;

/// Everything that can go wrong while answering a request.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// What every app answers alike: a bad or oversized body, an unknown path or method (for the
    /// 405 axum adds the `Allow` header).
    #[error(transparent)]
    Request(#[from] RequestError),
    /// POST without `--database-url`.
    #[error("no database configured (--database-url)")]
    NoDatabase,
    /// No pooled connection could be had (database down, pool exhausted past the wait timeout).
    #[error("database unavailable")]
    DbUnavailable(#[source] deadpool_postgres::PoolError),
    /// The database did not answer within `--db-timeout`.
    #[error("database unavailable")]
    DbTimeout(#[source] tokio::time::error::Elapsed),
    /// The connection broke or the server refused to serve (restart, crash, too many clients).
    #[error("database unavailable")]
    DbGone(#[source] tokio_postgres::Error),
    /// The database rejected the statement.
    #[error("database error")]
    Db(#[source] tokio_postgres::Error),
}

impl AppError {
    /// [`AppError::DbGone`] when the error means the database went away, not that the query was
    /// wrong: a closed connection or a SQLSTATE of [`unavailable_state`]; else [`AppError::Db`].
    #[must_use]
    pub fn from_db(error: tokio_postgres::Error) -> Self {
        if error.is_closed() || error.code().is_some_and(unavailable_state) {
            Self::DbGone(error)
        } else {
            Self::Db(error)
        }
    }

    fn status(&self) -> StatusCode {
        match self {
            Self::Request(e) => server_common::axum::status(e),
            Self::NoDatabase | Self::DbUnavailable(_) | Self::DbTimeout(_) | Self::DbGone(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            Self::Db(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn is_database(&self) -> bool {
        matches!(
            self,
            Self::DbUnavailable(_) | Self::DbTimeout(_) | Self::DbGone(_) | Self::Db(_)
        )
    }
}

/// SQLSTATE classes meaning "the server cannot serve now", as in the Go apps: 08 connection
/// exception, 53 insufficient resources (e.g. too many clients), 57 operator intervention
/// (e.g. a shutdown).
fn unavailable_state(state: &SqlState) -> bool {
    ["08", "53", "57"]
        .iter()
        .any(|class| state.code().starts_with(class))
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let status = self.status();
        // A dead database under load fails thousands of requests a second: one log line a
        // second says so without flooding stderr and skewing the run (as in the Go apps).
        if self.is_database() && !DB_LOG_GATE.allow_at(unix_seconds()) {
            let body = server_common::error_json(&self.to_string());
            return (status, [(header::CONTENT_TYPE, "application/json")], body).into_response();
        }
        // The client gets a short reason; the log gets the database's cause. (A missing
        // database is configuration, said once at start, not per request.)
        server_common::axum::error_response(SERVER_NAME, status, &self)
    }
}

static DB_LOG_GATE: LogGate = LogGate(AtomicU64::new(0));

/// Lets one caller a second through.
#[derive(Debug)]
struct LogGate(AtomicU64);

impl LogGate {
    fn allow_at(&self, now_s: u64) -> bool {
        let last = self.0.load(Ordering::Relaxed);
        now_s > last
            && self
                .0
                .compare_exchange(last, now_s, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }
}

fn unix_seconds() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_gate_lets_one_line_a_second_through() {
        let gate = LogGate(AtomicU64::new(0));
        assert!(gate.allow_at(10));
        assert!(!gate.allow_at(10));
        assert!(gate.allow_at(11));
        assert!(!gate.allow_at(9));
    }

    #[test]
    fn unavailable_states_are_the_go_apps_classes() {
        for (state, want) in [
            (SqlState::ADMIN_SHUTDOWN, true),
            (SqlState::CRASH_SHUTDOWN, true),
            (SqlState::CANNOT_CONNECT_NOW, true),
            (SqlState::TOO_MANY_CONNECTIONS, true),
            (SqlState::CONNECTION_FAILURE, true),
            (SqlState::STRING_DATA_RIGHT_TRUNCATION, false),
            (SqlState::UNDEFINED_TABLE, false),
            (SqlState::UNIQUE_VIOLATION, false),
        ] {
            assert_eq!(unavailable_state(&state), want, "{}", state.code());
        }
    }
}
