//! Entry point of actix_matrix: the allocator choice, flags in, exit code out.

use std::process::ExitCode;

use clap::Parser;

// Chosen only by the `mimalloc` cargo feature, so build variants never edit files.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    match actix_matrix::run(&actix_matrix::Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("actix_matrix: error: {e}");
            ExitCode::FAILURE
        }
    }
}
