//! Postgres for axum_devices: the table-name check, the pool, the start-up `CREATE TABLE` and the
//! per-request insert. Start-up failures are `StartError`s; request-time ones are `AppError`s.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use server_common::error_chain;
use tokio_postgres::NoTls;

use crate::StartError;
use crate::devices::{Device, NewDevice};
use crate::error::AppError;

/// Postgres truncates identifiers past 63 bytes; refuse them instead of surprising anyone.
const MAX_IDENT_LEN: usize = 63;

/// A table name that is safe to splice into SQL: `[A-Za-z_][A-Za-z0-9_]*`, at most 63 bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableName(String);

impl FromStr for TableName {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut bytes = s.bytes();
        let head_ok = bytes
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_');
        let tail_ok = bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if head_ok && tail_ok && s.len() <= MAX_IDENT_LEN {
            Ok(Self(s.to_owned()))
        } else {
            Err(format!(
                "table name {s:?} is not a plain identifier ([A-Za-z_][A-Za-z0-9_]*, ≤ 63 bytes)"
            ))
        }
    }
}

impl fmt::Display for TableName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A connection pool and the SQL for one table.
#[derive(Clone)]
pub struct Db {
    pool: Pool,
    insert_sql: String,
    /// Bounds one insert as a whole: pool wait, connect and query.
    timeout: Duration,
}

impl fmt::Debug for Db {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Db")
            .field("insert_sql", &self.insert_sql)
            .finish_non_exhaustive()
    }
}

impl Db {
    /// Builds the pool, checks the database answers and creates the table if it is missing.
    /// `timeout` bounds each insert (and each connect, unless the URL sets `connect_timeout`).
    ///
    /// # Errors
    /// A bad URL, an unreachable database, or a failed `CREATE TABLE`.
    pub async fn connect(
        url: &str,
        pool_size: usize,
        timeout: Duration,
        table: &TableName,
    ) -> Result<Self, StartError> {
        let mut pg_config: tokio_postgres::Config = url
            .parse()
            .map_err(|e| StartError::Database(format!("bad --database-url: {e}")))?;
        if pg_config.get_connect_timeout().is_none() {
            pg_config.connect_timeout(timeout);
        }
        // Fast recycling only checks `is_closed`, which turns true as soon as the connection
        // task sees the server hang up (restart, crash), so dead connections are not handed out.
        let manager = Manager::from_config(
            pg_config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(pool_size)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(timeout))
            .create_timeout(Some(timeout))
            .recycle_timeout(Some(timeout))
            .build()
            .map_err(|e| StartError::Database(format!("cannot build connection pool: {e}")))?;
        let client = pool.get().await.map_err(|e| {
            StartError::Database(format!("cannot reach database: {}", error_chain(&e)))
        })?;
        let create = format!(
            "CREATE TABLE IF NOT EXISTS {table} \
             (id SERIAL PRIMARY KEY, mac varchar(17) NOT NULL, firmware varchar(10) NOT NULL)"
        );
        client.batch_execute(&create).await.map_err(|e| {
            StartError::Database(format!("cannot create table {table}: {}", error_chain(&e)))
        })?;
        let insert_sql =
            format!("INSERT INTO {table} (mac, firmware) VALUES ($1, $2) RETURNING id");
        Ok(Self {
            pool,
            insert_sql,
            timeout,
        })
    }

    /// Inserts one device and returns it with its new id. The row is committed when this returns
    /// `Ok`: the statement is its own implicit transaction, committed at the `Sync` that ends the
    /// query, and Postgres flushes a result this small only at that `Sync`, after the commit.
    ///
    /// # Errors
    /// [`AppError::DbUnavailable`] without a connection, [`AppError::DbTimeout`] past the
    /// timeout (a hung server), [`AppError::DbGone`] when the connection breaks or the server
    /// refuses, [`AppError::Db`] when the statement fails.
    pub async fn insert(&self, device: NewDevice) -> Result<Device, AppError> {
        tokio::time::timeout(self.timeout, self.insert_now(device))
            .await
            .map_err(AppError::DbTimeout)?
    }

    async fn insert_now(&self, device: NewDevice) -> Result<Device, AppError> {
        let client = self.pool.get().await.map_err(AppError::DbUnavailable)?;
        let statement = client
            .prepare_cached(&self.insert_sql)
            .await
            .map_err(AppError::from_db)?;
        let row = client
            .query_one(&statement, &[&device.mac, &device.firmware])
            .await
            .map_err(AppError::from_db)?;
        let id: i32 = row.try_get(0).map_err(AppError::from_db)?;
        Ok(Device {
            id: i64::from(id),
            mac: device.mac,
            firmware: device.firmware,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_names_are_plain_identifiers() {
        for ok in ["axum_device", "_t", "T1", "a_b_9"] {
            assert!(ok.parse::<TableName>().is_ok(), "{ok}");
        }
        let too_long = "a".repeat(64);
        for bad in [
            "",
            "1abc",
            "a-b",
            "a b",
            "a;drop table x",
            "\"quoted\"",
            "é",
            too_long.as_str(),
        ] {
            assert!(bad.parse::<TableName>().is_err(), "{bad}");
        }
    }
}
