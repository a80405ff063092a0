//! Entry point of actix_matrix: the allocator choice, flags in, exit code out.

use std::process::ExitCode;

use clap::Parser;

// Chosen only by the `mimalloc` cargo feature, so build variants never edit files.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let result = actix_matrix::run(&actix_matrix::Cli::parse());
    server_common::exit_code(actix_matrix::SERVER_NAME, result)
}
