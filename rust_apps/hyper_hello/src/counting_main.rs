//! hyper_hello with a counting global allocator: the harness's `counting` variant, which reads allocations
//! per request through `server_common::alloc_count` and is never timed (its allocator adds an atomic per call).

use std::alloc::System;
use std::process::ExitCode;

use clap::Parser;
use server_common::alloc_count::{Counting, serve_from_env};

#[global_allocator]
static GLOBAL: Counting<System> = Counting(System);

fn main() -> ExitCode {
    if let Err(e) = serve_from_env() {
        return server_common::exit_code(hyper_hello::routes::SERVER_NAME, Err(e));
    }
    let result = hyper_hello::run(&hyper_hello::Cli::parse());
    server_common::exit_code(hyper_hello::routes::SERVER_NAME, result)
}
