//! hyper_hello: the smallest polyperf server, plaintext on hyper 1.x with no framework, on a
//! multi-thread or a current-thread tokio runtime. `routes` answers, `server` accepts.

pub mod routes;
pub mod server;

use std::io;

use server_common::{ServeArgs, ShutdownSignal};

/// Which tokio runtime runs the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RuntimeKind {
    /// Multi-thread runtime with `--workers` worker threads.
    Multi,
    /// Current-thread runtime: everything on the main thread, `--workers` ignored.
    Current,
}

/// `hyper_hello`: GET / answers "Hello, World!".
#[derive(Debug, Clone, clap::Parser)]
#[command(name = "hyper_hello", version, about)]
pub struct Cli {
    #[command(flatten)]
    pub serve: ServeArgs,
    /// Tokio runtime flavour.
    #[arg(long, value_enum, default_value_t = RuntimeKind::Multi)]
    pub runtime: RuntimeKind,
}

/// Starts the chosen runtime, binds, announces and serves until SIGTERM/SIGINT.
///
/// # Errors
/// When the runtime, the signal handlers or the socket cannot be set up; messages say which.
pub fn run(cli: &Cli) -> io::Result<()> {
    let runtime = match cli.runtime {
        RuntimeKind::Multi => server_common::multi_thread_runtime(cli.serve.workers),
        RuntimeKind::Current => server_common::current_thread_runtime(),
    }?;
    runtime.block_on(async {
        let shutdown = ShutdownSignal::install()?;
        let listener = server_common::bind(&cli.serve.host, cli.serve.port).await?;
        server_common::announce(&cli.serve.host, listener.local_addr()?);
        server::serve(listener, shutdown).await;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[test]
    fn runtime_flag_takes_multi_and_current() {
        assert_eq!(
            Cli::try_parse_from(["hyper_hello"]).unwrap().runtime,
            RuntimeKind::Multi
        );
        let cli = Cli::try_parse_from(["hyper_hello", "--runtime", "current"]).unwrap();
        assert_eq!(cli.runtime, RuntimeKind::Current);
        assert!(Cli::try_parse_from(["hyper_hello", "--runtime", "other"]).is_err());
        assert!(Cli::try_parse_from(["hyper_hello", "--workers", "0"]).is_err());
    }
}
