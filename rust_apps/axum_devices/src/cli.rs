//! The axum_devices command line: the common server flags plus the database ones.

use server_common::ServeArgs;

use crate::db::TableName;

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
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u16).range(1..))]
    pub pool_size: u16,
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
        assert_eq!(cli.table.to_string(), "axum_device");
    }

    #[test]
    fn rejects_a_table_that_is_not_an_identifier() {
        assert!(Cli::try_parse_from(["axum_devices", "--table", "x; drop"]).is_err());
        assert!(Cli::try_parse_from(["axum_devices", "--pool-size", "0"]).is_err());
    }
}
