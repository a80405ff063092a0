package store

import (
	"context"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestValidIdentifier(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{"gnet_device", true}, {"_x", true}, {"T9", true}, {"", false}, {"9t", false},
		{"a-b", false}, {"a b", false}, {"a;drop", false}, {"é", false}, {"\"q\"", false},
		{string(make([]byte, 64)), false},
		{"a23456789012345678901234567890123456789012345678901234567890123", true},
		{"a234567890123456789012345678901234567890123456789012345678901234", false},
	} {
		if got := ValidIdentifier(tc.in); got != tc.want {
			t.Errorf("ValidIdentifier(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestUnavailableClass(t *testing.T) {
	for code, want := range map[string]bool{
		"08006": true, "53300": true, "57P01": true, "42P01": false, "23505": false, "22001": false,
	} {
		if got := unavailableClass(code); got != want {
			t.Errorf("unavailableClass(%s) = %v, want %v", code, got, want)
		}
	}
}

func TestServerGone(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&pgconn.PgError{Code: "57P01"}, true},
		{fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: "57P02"}), true},
		{&pgconn.PgError{Code: "53300"}, false},
		{&pgconn.PgError{Code: "22001"}, false},
		{context.DeadlineExceeded, false},
		{fmt.Errorf("acquire: %w", context.Canceled), false},
		{io.ErrUnexpectedEOF, true},
	} {
		if got := serverGone(tc.err); got != tc.want {
			t.Errorf("serverGone(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestOpenRejectsBadInput(t *testing.T) {
	ctx := context.Background()
	if _, err := Open(ctx, "postgres://127.0.0.1:1/x", 1, time.Second, "bad name"); err == nil {
		t.Error("Open accepted a bad table name")
	}
	if _, err := Open(ctx, "::not a url::", 1, time.Second, "t"); err == nil {
		t.Error("Open accepted a bad URL")
	}
}

// TestInsert needs a scratch database: POLYPERF_TEST_DATABASE_URL.
func TestInsert(t *testing.T) {
	url := os.Getenv("POLYPERF_TEST_DATABASE_URL")
	if url == "" {
		t.Skip("POLYPERF_TEST_DATABASE_URL not set")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	table := fmt.Sprintf("polyperf_store_test_%d", time.Now().UnixNano())
	s, err := Open(ctx, url, 2, 2*time.Second, table)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	defer s.pool.Exec(context.Background(), "DROP TABLE "+table) //nolint:errcheck
	id1, err := s.Insert(ctx, "AA-BB", "1.0")
	if err != nil {
		t.Fatal(err)
	}
	id2, err := s.Insert(ctx, "CC-DD", "2.0")
	if err != nil || id2 <= id1 {
		t.Fatalf("second insert: id %d after %d, err %v", id2, id1, err)
	}
	if _, err := s.Insert(ctx, "123456789012345678", "1"); err == nil {
		t.Fatal("insert of an over-long mac succeeded")
	}
}
