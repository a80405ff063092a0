//! Entry point of bson_server: flags in, exit code out; everything else lives in the library.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let result = bson_server::run(&bson_server::Cli::parse());
    server_common::exit_code(bson_server::SERVER_NAME, result)
}
