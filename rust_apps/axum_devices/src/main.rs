//! Entry point of axum_devices: flags in, exit code out; everything else lives in the library.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    match axum_devices::run(&axum_devices::cli::Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("axum_devices: error: {e}");
            ExitCode::FAILURE
        }
    }
}
