//! Entry point of hyper_hello: flags in, exit code out; everything else lives in the library.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    match hyper_hello::run(&hyper_hello::Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hyper_hello: error: {e}");
            ExitCode::FAILURE
        }
    }
}
