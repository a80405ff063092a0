//! What every polyperf Rust server shares, so the harness sees one contract: the common CLI flags,
//! the runtime, the single `listening on` line, SIGTERM/SIGINT handling, the exit code, and (in
//! `error`) the request errors with their JSON body. `axum` (feature `axum`) adds the axum glue.

#[cfg(feature = "count-allocs")]
pub mod alloc_count;
#[cfg(feature = "axum")]
pub mod axum;
mod error;

use std::io;
use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::process::ExitCode;
use std::time::Duration;

pub use crate::error::{RequestError, error_chain, error_json, json_object};

/// The body of every app's `GET /healthz`.
pub const HEALTHZ_JSON: &str = r#"{"status":"ok"}"#;

/// How long in-flight requests may take to finish after a shutdown signal.
pub const GRACE_PERIOD: Duration = Duration::from_secs(10);

/// Flags every server takes; apps `#[command(flatten)]` this into their own `Cli`.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Port to bind (0 picks a free one; the listening line shows which).
    #[arg(long, default_value_t = 8080)]
    pub port: u16,
    /// Worker threads (default: available parallelism).
    #[arg(long, default_value_t = default_workers())]
    pub workers: NonZeroUsize,
}

/// The number of CPUs this process may use, or 1 when that cannot be told.
#[must_use]
pub fn default_workers() -> NonZeroUsize {
    std::thread::available_parallelism().unwrap_or(NonZeroUsize::MIN)
}

/// A multi-thread tokio runtime with `workers` worker threads.
///
/// # Errors
/// When the OS refuses the threads or the I/O driver.
pub fn multi_thread_runtime(workers: NonZeroUsize) -> io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers.get())
        .enable_all()
        .build()
}

/// A current-thread tokio runtime: every task on the calling thread.
///
/// # Errors
/// When the OS refuses the I/O driver.
pub fn current_thread_runtime() -> io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}

/// Binds `host:port` (host may be a name, IPv4 or IPv6 address).
///
/// # Errors
/// When the address does not resolve or cannot be bound; the message names the address.
pub async fn bind(host: &str, port: u16) -> io::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind((host, port))
        .await
        .map_err(|e| io::Error::new(e.kind(), format!("cannot bind {host}:{port}: {e}")))
}

/// The one line the harness waits for, e.g. `listening on http://127.0.0.1:8080`.
///
/// The host is printed as given on the command line and the port as bound, so `--port 0` works.
#[must_use]
pub fn listening_line(host: &str, addr: SocketAddr) -> String {
    let port = addr.port();
    if host.contains(':') && !host.starts_with('[') {
        format!("listening on http://[{host}]:{port}")
    } else {
        format!("listening on http://{host}:{port}")
    }
}

/// Prints [`listening_line`] to stderr.
pub fn announce(host: &str, addr: SocketAddr) {
    eprintln!("{}", listening_line(host, addr));
}

/// A server's exit: success, or `<app>: error: <error>` on stderr and failure. Every `main` is
/// `exit_code(APP, run(&Cli::parse()))`.
pub fn exit_code<E: std::fmt::Display>(app: &str, result: Result<(), E>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{app}: error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// SIGTERM and SIGINT, installed up front so a failure to install them is a start-up error.
#[derive(Debug)]
pub struct ShutdownSignal {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
}

impl ShutdownSignal {
    /// Installs the handlers; must run inside a tokio runtime.
    ///
    /// # Errors
    /// When the OS refuses a signal handler.
    #[cfg(unix)]
    pub fn install() -> io::Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Self {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
        })
    }

    /// Installs the handlers; must run inside a tokio runtime.
    ///
    /// # Errors
    /// Never on this platform; the signature matches the unix one.
    #[cfg(not(unix))]
    pub fn install() -> io::Result<Self> {
        Ok(Self {})
    }

    /// Waits for the first SIGTERM or SIGINT and logs which one came.
    #[cfg(unix)]
    pub async fn recv(mut self) {
        let name = tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.int.recv() => "SIGINT",
        };
        eprintln!("{name} received, shutting down");
    }

    /// Waits for Ctrl-C.
    #[cfg(not(unix))]
    pub async fn recv(self) {
        let _ = tokio::signal::ctrl_c().await;
        eprintln!("Ctrl-C received, shutting down");
    }

    /// Splits the signal into a trigger for the server's graceful shutdown and a deadline that
    /// fires [`GRACE_PERIOD`] after the trigger did, so a stuck client cannot hold the exit.
    pub fn with_deadline(
        self,
    ) -> (
        impl Future<Output = ()> + Send,
        impl Future<Output = ()> + Send,
    ) {
        let (fired_tx, fired_rx) = tokio::sync::oneshot::channel::<()>();
        let trigger = async move {
            self.recv().await;
            let _ = fired_tx.send(());
        };
        let deadline = async move {
            if fired_rx.await.is_ok() {
                tokio::time::sleep(GRACE_PERIOD).await;
                eprintln!("grace period of {GRACE_PERIOD:?} over, closing remaining connections");
            } else {
                // The trigger was dropped unfired: the server stopped on its own.
                std::future::pending::<()>().await;
            }
        };
        (trigger, deadline)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listening_line_matches_the_contract() {
        let addr: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        assert_eq!(
            listening_line("127.0.0.1", addr),
            "listening on http://127.0.0.1:8080"
        );
        let v6: SocketAddr = "[::1]:9000".parse().unwrap();
        assert_eq!(listening_line("::1", v6), "listening on http://[::1]:9000");
    }
}
