//! Entry point of axum_devices: flags in, exit code out; everything else lives in the library.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let result = axum_devices::run(&axum_devices::cli::Cli::parse());
    server_common::exit_code(axum_devices::SERVER_NAME, result)
}
