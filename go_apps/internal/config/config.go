// Package config turns command-line flags (and DATABASE_URL) into the
// settings shared by every polyperf Go server, so both binaries accept
// exactly the flags the Python harness passes.
package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strconv"

	"polyperf/go_apps/internal/store"
)

// Config is what a server needs to start. Zero Workers means "runtime default".
type Config struct {
	AppName     string // sent as the Server header and used in log lines
	Host        string
	Port        int
	Workers     int
	DatabaseURL string // empty: POST answers 503
	PoolSize    int
	Table       string
}

// Addr is host:port, bracketing IPv6 literals.
func (c Config) Addr() string { return net.JoinHostPort(c.Host, strconv.Itoa(c.Port)) }

// ErrHelp is returned when -h/--help was asked; usage was already printed.
var ErrHelp = flag.ErrHelp

// Parse reads args (without the program name). getenv supplies DATABASE_URL
// when --database-url is absent; usage and errors go to stderr.
func Parse(appName, defaultTable string, args []string, getenv func(string) string, stderr io.Writer) (Config, error) {
	cfg := Config{AppName: appName}
	fs := flag.NewFlagSet(appName, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.Host, "host", "127.0.0.1", "address to listen on")
	fs.IntVar(&cfg.Port, "port", 8080, "TCP port to listen on")
	fs.IntVar(&cfg.Workers, "workers", 0, "event loops (gnet) or GOMAXPROCS (net/http); 0 = GOMAXPROCS default")
	fs.StringVar(&cfg.DatabaseURL, "database-url", "", "PostgreSQL URL (default $DATABASE_URL); empty disables POST")
	fs.IntVar(&cfg.PoolSize, "pool-size", 32, "maximum PostgreSQL connections")
	fs.StringVar(&cfg.Table, "table", defaultTable, "table for inserted devices")
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("%s: unexpected argument %q", appName, fs.Arg(0))
	}
	if cfg.DatabaseURL == "" && getenv != nil {
		cfg.DatabaseURL = getenv("DATABASE_URL")
	}
	if err := cfg.validate(); err != nil {
		return Config{}, fmt.Errorf("%s: %w", appName, err)
	}
	return cfg, nil
}

func (c Config) validate() error {
	switch {
	case c.Host == "":
		return errors.New("--host must not be empty")
	case c.Port < 0 || c.Port > 65535:
		return fmt.Errorf("--port %d out of range 0..65535", c.Port)
	case c.Workers < 0:
		return fmt.Errorf("--workers %d must be >= 0", c.Workers)
	case c.PoolSize < 1 || c.PoolSize > 10000:
		return fmt.Errorf("--pool-size %d out of range 1..10000", c.PoolSize)
	case !store.ValidIdentifier(c.Table):
		return fmt.Errorf("--table %q is not an identifier [A-Za-z_][A-Za-z0-9_]{0,62}", c.Table)
	}
	return nil
}
