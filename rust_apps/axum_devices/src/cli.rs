//! The axum_devices command line: the common server flags plus the database ones.

use std::time::Duration;

use server_common::ServeArgs;

use crate::db::TableName;

/// Default of `--pool-size`, the same in the Go apps.
pub const DEFAULT_POOL_SIZE: u16 = 32;
/// Largest `--pool-size`, the same in the Go apps.
pub const MAX_POOL_SIZE: u16 = 10_000;
/// Default of `--db-timeout`, seconds, the same in the Go apps.
pub const DEFAULT_DB_TIMEOUT_S: f64 = 2.0;
/// Largest `--db-timeout`, seconds.
const MAX_DB_TIMEOUT_S: f64 = 300.0;

/// `axum_devices`: GET a fixed device list, POST devices into Postgres.
#[derive(Debug, Clone, clap::Parser)]
#[command(name = "axum_devices", version, about)]
pub struct Cli {
    #[command(flatten)]
    pub serve: ServeArgs,
    /// Postgres URL, e.g. postgres://user:pass@127.0.0.1/db; without it POST answers 503.
    #[arg(long, env = "DATABASE_URL")]
    pub database_url: Option<String>,
    /// Largest number of pooled database connections.
    #[arg(long, env = "DATABASE_POOL_SIZE", default_value_t = DEFAULT_POOL_SIZE,
          value_parser = clap::value_parser!(u16).range(1..=i64::from(MAX_POOL_SIZE)))]
    pub pool_size: u16,
    /// Seconds a POST may spend on the database (pool wait, connect, INSERT) before a 503.
    #[arg(long, env = "DATABASE_TIMEOUT", default_value_t = DEFAULT_DB_TIMEOUT_S,
          value_parser = parse_timeout)]
    pub db_timeout: f64,
    /// Table the devices go into (created at start if missing).
    #[arg(long, default_value = "axum_device")]
    pub table: TableName,
}

impl Cli {
    /// The database URL, treating an empty `DATABASE_URL` as none.
    #[must_use]
    pub fn database_url(&self) -> Option<&str> {
        self.database_url
            .as_deref()
            .filter(|url| !url.trim().is_empty())
    }

    /// `--db-timeout` as a duration (validated when parsed).
    #[must_use]
    pub fn db_timeout(&self) -> Duration {
        Duration::from_secs_f64(self.db_timeout)
    }
}

fn parse_timeout(text: &str) -> Result<f64, String> {
    let secs: f64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    // `!(0 < x <= max)` also refuses NaN.
    if !(secs > 0.0 && secs <= MAX_DB_TIMEOUT_S) {
        return Err(format!(
            "{secs} out of range (0, {MAX_DB_TIMEOUT_S}] seconds"
        ));
    }
    Ok(secs)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[test]
    fn defaults_match_the_contract() {
        let cli = Cli::try_parse_from(["axum_devices"]).unwrap();
        assert_eq!(cli.serve.host, "127.0.0.1");
        assert_eq!(cli.serve.port, 8080);
        assert_eq!(cli.pool_size, 32);
        assert_eq!(cli.db_timeout(), Duration::from_secs(2));
        assert_eq!(cli.table.to_string(), "axum_device");
    }

    #[test]
    fn pool_size_and_timeout_flags() {
        let cli = Cli::try_parse_from(["axum_devices", "--pool-size", "500", "--db-timeout=0.5"])
            .unwrap();
        assert_eq!(cli.pool_size, 500);
        assert_eq!(cli.db_timeout(), Duration::from_millis(500));
        for bad in ["0", "-1", "NaN", "301", "2s"] {
            assert!(
                Cli::try_parse_from(["axum_devices", "--db-timeout", bad]).is_err(),
                "{bad}"
            );
        }
        assert!(Cli::try_parse_from(["axum_devices", "--pool-size", "10001"]).is_err());
    }

    #[test]
    fn database_settings_also_come_from_the_environment() {
        let command = <Cli as clap::CommandFactory>::command();
        let env_of = |id: &str| {
            command
                .get_arguments()
                .find(|arg| arg.get_id() == id)
                .and_then(|arg| arg.get_env())
                .and_then(|env| env.to_str())
                .map(str::to_owned)
        };
        assert_eq!(env_of("database_url").as_deref(), Some("DATABASE_URL"));
        assert_eq!(env_of("pool_size").as_deref(), Some("DATABASE_POOL_SIZE"));
        assert_eq!(env_of("db_timeout").as_deref(), Some("DATABASE_TIMEOUT"));
    }

    #[test]
    fn rejects_a_table_that_is_not_an_identifier() {
        assert!(Cli::try_parse_from(["axum_devices", "--table", "x; drop"]).is_err());
        assert!(Cli::try_parse_from(["axum_devices", "--pool-size", "0"]).is_err());
    }
}
