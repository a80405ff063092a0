//! Entry point of bson_server: flags in, exit code out; everything else lives in the library.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    match bson_server::run(&bson_server::Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bson_server: error: {e}");
            ExitCode::FAILURE
        }
    }
}
