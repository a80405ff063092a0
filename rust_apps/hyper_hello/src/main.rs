//! Entry point of hyper_hello: flags in, exit code out; everything else lives in the library.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let result = hyper_hello::run(&hyper_hello::Cli::parse());
    server_common::exit_code(hyper_hello::routes::SERVER_NAME, result)
}
