// Package config turns command-line flags (and DATABASE_URL) into the
// settings shared by every polyperf Go server, so both binaries accept
// exactly the flags the Python harness passes.
package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"strconv"
	"time"

	"polyperf/go_apps/internal/store"
	"polyperf/go_apps/internal/testslowdown"
)

// Defaults shared with the Rust apps (rust_apps/axum_devices).
const (
	DefaultPoolSize = 32
	// DefaultDBTimeout bounds a POST's database work (pool wait, connect,
	// INSERT): past it the answer is 503, so a dead database never hangs a client.
	DefaultDBTimeout = 2 * time.Second
	maxPoolSize      = 10000
	maxDBTimeout     = 300 * time.Second
)

// Environment variables read when the matching flag is absent.
const (
	EnvDatabaseURL = "DATABASE_URL"
	EnvPoolSize    = "DATABASE_POOL_SIZE"
	EnvDBTimeout   = "DATABASE_TIMEOUT"
)

// Config is what a server needs to start. Zero Workers means "runtime default".
type Config struct {
	AppName     string // sent as the Server header and used in log lines
	Host        string
	Port        int
	Workers     int
	DatabaseURL string // empty: POST answers 503
	PoolSize    int
	DBTimeout   time.Duration
	Table       string
	// SlowdownPct is the test-only slowdown of the net/http handler, from
	// $POLYPERF_TEST_SLOWDOWN_PCT (package testslowdown); 0 in normal use.
	SlowdownPct float64
}

// Addr is host:port, bracketing IPv6 literals.
func (c Config) Addr() string { return net.JoinHostPort(c.Host, strconv.Itoa(c.Port)) }

// ErrHelp is returned when -h/--help was asked; usage was already printed.
var ErrHelp = flag.ErrHelp

// Parse reads args (without the program name). getenv supplies DATABASE_URL,
// DATABASE_POOL_SIZE and DATABASE_TIMEOUT when their flags are absent; usage
// and errors go to stderr.
func Parse(appName, defaultTable string, args []string, getenv func(string) string, stderr io.Writer) (Config, error) {
	cfg := Config{AppName: appName}
	var timeoutSecs float64
	fs := flag.NewFlagSet(appName, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.Host, "host", "127.0.0.1", "address to listen on")
	fs.IntVar(&cfg.Port, "port", 8080, "TCP port to listen on")
	fs.IntVar(&cfg.Workers, "workers", 0, "event loops (gnet) or GOMAXPROCS (net/http); 0 = GOMAXPROCS default")
	fs.StringVar(&cfg.DatabaseURL, "database-url", "", "PostgreSQL URL (default $"+EnvDatabaseURL+"); empty disables POST")
	fs.IntVar(&cfg.PoolSize, "pool-size", DefaultPoolSize, "maximum PostgreSQL connections (env $"+EnvPoolSize+")")
	fs.Float64Var(&timeoutSecs, "db-timeout", DefaultDBTimeout.Seconds(),
		"seconds a POST may spend on the database (pool wait, connect, INSERT) before a 503 (env $"+EnvDBTimeout+")")
	fs.StringVar(&cfg.Table, "table", defaultTable, "table for inserted devices")
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("%s: unexpected argument %q", appName, fs.Arg(0))
	}
	if err := fromEnv(fs, getenv, &cfg, &timeoutSecs); err != nil {
		return Config{}, fmt.Errorf("%s: %w", appName, err)
	}
	if err := cfg.setTimeout(timeoutSecs); err != nil {
		return Config{}, fmt.Errorf("%s: %w", appName, err)
	}
	if err := cfg.validate(); err != nil {
		return Config{}, fmt.Errorf("%s: %w", appName, err)
	}
	return cfg, nil
}

// fromEnv fills the database settings whose flags were not given from the
// environment; a flag always wins, as in the Rust apps (clap's `env`).
func fromEnv(fs *flag.FlagSet, getenv func(string) string, cfg *Config, timeoutSecs *float64) error {
	if getenv == nil {
		return nil
	}
	pct, err := testslowdown.Parse(getenv(testslowdown.Env))
	if err != nil {
		return err
	}
	cfg.SlowdownPct = pct
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if !given["database-url"] {
		cfg.DatabaseURL = getenv(EnvDatabaseURL)
	}
	if v := getenv(EnvPoolSize); v != "" && !given["pool-size"] {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("$%s=%q is not an integer", EnvPoolSize, v)
		}
		cfg.PoolSize = n
	}
	if v := getenv(EnvDBTimeout); v != "" && !given["db-timeout"] {
		secs, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("$%s=%q is not a number of seconds", EnvDBTimeout, v)
		}
		*timeoutSecs = secs
	}
	return nil
}

func (c *Config) setTimeout(secs float64) error {
	if math.IsNaN(secs) || secs <= 0 || secs > maxDBTimeout.Seconds() {
		return fmt.Errorf("--db-timeout %v out of range (0, %v] seconds", secs, maxDBTimeout.Seconds())
	}
	c.DBTimeout = time.Duration(secs * float64(time.Second))
	return nil
}

func (c Config) validate() error {
	switch {
	case c.Host == "":
		return errors.New("--host must not be empty")
	case c.Port < 0 || c.Port > 65535:
		return fmt.Errorf("--port %d out of range 0..65535", c.Port)
	case c.Workers < 0:
		return fmt.Errorf("--workers %d must be >= 0", c.Workers)
	case c.PoolSize < 1 || c.PoolSize > maxPoolSize:
		return fmt.Errorf("--pool-size %d out of range 1..%d", c.PoolSize, maxPoolSize)
	case !store.ValidIdentifier(c.Table):
		return fmt.Errorf("--table %q is not an identifier [A-Za-z_][A-Za-z0-9_]{0,62}", c.Table)
	}
	return nil
}
