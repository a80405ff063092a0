//! Shared settings of the pre-2019 scheduler benchmarks (`benches/old_scheduler.rs`). This crate sits
//! outside the main workspace, so it repeats `sched_bench`'s tiny worker-count helper instead of linking it.

/// Environment variable naming the worker-thread count (default: the available CPUs).
pub const WORKERS_ENV: &str = "POLYPERF_WORKERS";

/// Parses a worker count: `None` or an empty string means `default`; anything else must be an integer ≥ 1.
pub fn parse_workers(value: Option<&str>, default: usize) -> Result<usize, String> {
    match value.map(str::trim) {
        None | Some("") => Ok(default),
        Some(text) => match text.parse::<usize>() {
            Ok(n) if n >= 1 => Ok(n),
            _ => Err(format!(
                "{WORKERS_ENV} must be an integer >= 1, got {text:?}"
            )),
        },
    }
}

/// Worker count from [`WORKERS_ENV`], defaulting to the available parallelism (1 if unknown).
pub fn workers_from_env() -> Result<usize, String> {
    let default = std::thread::available_parallelism().map_or(1, usize::from);
    parse_workers(std::env::var(WORKERS_ENV).ok().as_deref(), default)
}

#[cfg(test)]
mod tests {
    use super::parse_workers;

    #[test]
    fn parses_or_defaults() {
        assert_eq!(parse_workers(None, 3), Ok(3));
        assert_eq!(parse_workers(Some(" "), 3), Ok(3));
        assert_eq!(parse_workers(Some("2"), 3), Ok(2));
        assert!(parse_workers(Some("0"), 3).is_err());
        assert!(parse_workers(Some("two"), 3).is_err());
    }
}
