//! Entry point of actix_matrix: the allocator choice, flags in, exit code out.

use std::process::ExitCode;

use clap::Parser;

// Chosen only by the `mimalloc` cargo feature, so build variants never edit files.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = actix_matrix::Cli::parse();
    let result = match &cli.command {
        Some(actix_matrix::Command::Bench(args)) => {
            actix_matrix::bench::run(args, &mut std::io::stdout().lock())
        }
        None => actix_matrix::run(&cli),
    };
    server_common::exit_code(actix_matrix::SERVER_NAME, result)
}
