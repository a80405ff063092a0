// Package store writes POSTed devices to PostgreSQL through a pgx pool. It is
// the only package that talks to the database; the HTTP layers see Insert.
package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrUnavailable marks failures to reach the database (as opposed to errors
// PostgreSQL itself reported); the HTTP layers answer 503 for it, 500 otherwise.
var ErrUnavailable = errors.New("database unavailable")

// startTimeout bounds the start-up ping so an unreachable database fails fast.
const startTimeout = 10 * time.Second

// Store is a pgx pool plus the SQL for one table.
type Store struct {
	pool      *pgxpool.Pool
	insertSQL string
}

// ValidIdentifier reports whether name can be spliced unquoted into SQL:
// [A-Za-z_][A-Za-z0-9_]*, at most 63 bytes (PostgreSQL's NAMEDATALEN-1).
func ValidIdentifier(name string) bool {
	if name == "" || len(name) > 63 {
		return false
	}
	for i, r := range name {
		switch {
		case r == '_', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// Open connects with at most poolSize connections, checks the database is
// reachable and creates table if it does not exist. connectTimeout bounds
// each new connection unless the URL sets connect_timeout itself.
func Open(ctx context.Context, url string, poolSize int, connectTimeout time.Duration, table string) (*Store, error) {
	if !ValidIdentifier(table) {
		return nil, fmt.Errorf("table name %q is not a plain SQL identifier", table)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database URL: %w", err)
	}
	cfg.MaxConns = int32(poolSize)
	if cfg.ConnConfig.ConnectTimeout == 0 {
		// pgxpool may finish a connect after the request that started it gave
		// up; without a bound a silent server would pin pool slots for minutes.
		cfg.ConnConfig.ConnectTimeout = connectTimeout
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("create database pool: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to database %s:%d: %w", cfg.ConnConfig.Host, cfg.ConnConfig.Port, err)
	}
	// Unquoted on purpose: the contract names the table exactly as given, so
	// other tools can query it unquoted too; ValidIdentifier rules out injection.
	create := "CREATE TABLE IF NOT EXISTS " + table +
		" (id SERIAL PRIMARY KEY, mac varchar(17) NOT NULL, firmware varchar(10) NOT NULL)"
	if _, err := pool.Exec(ctx, create); err != nil {
		pool.Close()
		return nil, fmt.Errorf("create table %s: %w", table, err)
	}
	return &Store{
		pool:      pool,
		insertSQL: "INSERT INTO " + table + " (mac, firmware) VALUES ($1, $2) RETURNING id",
	}, nil
}

// Insert stores one device and returns its id. Errors not reported by
// PostgreSQL itself (pool timeout, broken connection) wrap ErrUnavailable.
// Scan reads up to ReadyForQuery, so a returned id is a committed row.
func (s *Store) Insert(ctx context.Context, mac, firmware string) (int64, error) {
	var id int64
	err := s.pool.QueryRow(ctx, s.insertSQL, mac, firmware).Scan(&id)
	if err != nil {
		if serverGone(err) {
			// Every idle connection is as dead as this one (restart, crash):
			// drop them all now instead of failing one request per connection.
			s.pool.Reset()
		}
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && !unavailableClass(pgErr.Code) {
			return 0, fmt.Errorf("insert device: %w", err)
		}
		return 0, fmt.Errorf("insert device: %w: %w", ErrUnavailable, err)
	}
	return id, nil
}

// serverGone reports errors that mean the server restarted or died: a
// shutdown notice (57P01 admin, 57P02 crash, 57P03 not accepting yet) or a
// network-level failure. Timeouts and refusals such as "too many clients"
// (53300) are not: resetting the pool on them would only churn connections.
func serverGone(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return strings.HasPrefix(pgErr.Code, "57P")
	}
	return true
}

// unavailableClass reports SQLSTATE classes that mean "the server cannot
// serve now" rather than "this statement is wrong": 08 connection exception,
// 53 insufficient resources, 57 operator intervention (e.g. a shutdown).
func unavailableClass(code string) bool {
	return strings.HasPrefix(code, "08") || strings.HasPrefix(code, "53") || strings.HasPrefix(code, "57")
}

// Close waits for in-use connections to be released and closes the pool.
func (s *Store) Close() { s.pool.Close() }
