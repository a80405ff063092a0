//! actix_matrix with the system allocator under a counting global allocator: the harness's `counting` variant, which reads
//! allocations per request through `server_common::alloc_count` and is never timed.

use std::process::ExitCode;

use clap::Parser;
use server_common::alloc_count::{Counting, serve_from_env};

#[global_allocator]
static GLOBAL: Counting<std::alloc::System> = Counting(std::alloc::System);

fn main() -> ExitCode {
    if let Err(e) = serve_from_env() {
        return server_common::exit_code(actix_matrix::SERVER_NAME, Err(e));
    }
    let result = actix_matrix::run(&actix_matrix::Cli::parse());
    server_common::exit_code(actix_matrix::SERVER_NAME, result)
}
