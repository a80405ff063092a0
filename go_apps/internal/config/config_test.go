package config

import (
	"errors"
	"io"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	env := func(m map[string]string) func(string) string {
		return func(k string) string { return m[k] }
	}
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		want    Config
		wantErr bool
	}{
		{name: "defaults", want: Config{AppName: "app", Host: "127.0.0.1", Port: 8080, PoolSize: 32, DBTimeout: 2 * time.Second, Table: "app_device"}},
		{
			name: "double-dash and equals forms",
			args: []string{"--host", "0.0.0.0", "--port=9000", "--workers", "3", "--database-url", "postgres://x", "--pool-size=8", "--table", "T_1"},
			want: Config{AppName: "app", Host: "0.0.0.0", Port: 9000, Workers: 3, DatabaseURL: "postgres://x", PoolSize: 8, DBTimeout: 2 * time.Second, Table: "T_1"},
		},
		{
			name: "env database url",
			env:  map[string]string{"DATABASE_URL": "postgres://env"},
			want: Config{AppName: "app", Host: "127.0.0.1", Port: 8080, DatabaseURL: "postgres://env", PoolSize: 32, DBTimeout: 2 * time.Second, Table: "app_device"},
		},
		{
			name: "flag beats env",
			args: []string{"--database-url=postgres://flag"},
			env:  map[string]string{"DATABASE_URL": "postgres://env"},
			want: Config{AppName: "app", Host: "127.0.0.1", Port: 8080, DatabaseURL: "postgres://flag", PoolSize: 32, DBTimeout: 2 * time.Second, Table: "app_device"},
		},
		{
			name: "env pool size and timeout",
			env:  map[string]string{"DATABASE_POOL_SIZE": "500", "DATABASE_TIMEOUT": "0.5"},
			want: Config{AppName: "app", Host: "127.0.0.1", Port: 8080, PoolSize: 500, DBTimeout: 500 * time.Millisecond, Table: "app_device"},
		},
		{
			name: "flags beat env pool size and timeout",
			args: []string{"--pool-size", "128", "--db-timeout=1.5"},
			env:  map[string]string{"DATABASE_POOL_SIZE": "500", "DATABASE_TIMEOUT": "0.5"},
			want: Config{AppName: "app", Host: "127.0.0.1", Port: 8080, PoolSize: 128, DBTimeout: 1500 * time.Millisecond, Table: "app_device"},
		},
		{
			name: "test slowdown from env",
			env:  map[string]string{"POLYPERF_TEST_SLOWDOWN_PCT": "10"},
			want: Config{AppName: "app", Host: "127.0.0.1", Port: 8080, PoolSize: 32, DBTimeout: 2 * time.Second, Table: "app_device", SlowdownPct: 10},
		},
		{name: "test slowdown not a percentage", env: map[string]string{"POLYPERF_TEST_SLOWDOWN_PCT": "ten"}, wantErr: true},
		{name: "env pool size not a number", env: map[string]string{"DATABASE_POOL_SIZE": "many"}, wantErr: true},
		{name: "env pool size zero", env: map[string]string{"DATABASE_POOL_SIZE": "0"}, wantErr: true},
		{name: "env timeout not a number", env: map[string]string{"DATABASE_TIMEOUT": "2s"}, wantErr: true},
		{name: "zero timeout", args: []string{"--db-timeout", "0"}, wantErr: true},
		{name: "huge timeout", args: []string{"--db-timeout", "301"}, wantErr: true},
		{name: "NaN timeout", args: []string{"--db-timeout", "NaN"}, wantErr: true},
		{name: "bad table", args: []string{"--table", "x; drop"}, wantErr: true},
		{name: "table starts with digit", args: []string{"--table", "1x"}, wantErr: true},
		{name: "table too long", args: []string{"--table", "a234567890123456789012345678901234567890123456789012345678901234"}, wantErr: true},
		{name: "bad port", args: []string{"--port", "70000"}, wantErr: true},
		{name: "negative workers", args: []string{"--workers", "-1"}, wantErr: true},
		{name: "zero pool", args: []string{"--pool-size", "0"}, wantErr: true},
		{name: "unknown flag", args: []string{"--nope"}, wantErr: true},
		{name: "stray argument", args: []string{"extra"}, wantErr: true},
		{name: "not a number", args: []string{"--port", "http"}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse("app", "app_device", tc.args, env(tc.env), io.Discard)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if err == nil && got != tc.want {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	_, err := Parse("app", "t", []string{"--help"}, nil, io.Discard)
	if !errors.Is(err, ErrHelp) {
		t.Fatalf("err = %v, want ErrHelp", err)
	}
}

func TestAddr(t *testing.T) {
	for _, tc := range []struct {
		host string
		want string
	}{{"127.0.0.1", "127.0.0.1:80"}, {"::1", "[::1]:80"}, {"localhost", "localhost:80"}} {
		if got := (Config{Host: tc.host, Port: 80}).Addr(); got != tc.want {
			t.Errorf("Addr(%q) = %q, want %q", tc.host, got, tc.want)
		}
	}
}
