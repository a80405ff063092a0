package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"testing"
	"time"

	"polyperf/go_apps/internal/devices"
	"polyperf/go_apps/internal/store"
)

func TestRoute(t *testing.T) {
	tests := []struct {
		method, path string
		ep           Endpoint
		allow        string
	}{
		{"GET", "/healthz", Healthz, ""},
		{"HEAD", "/healthz", Healthz, ""},
		{"POST", "/healthz", MethodNotAllowed, "GET, HEAD"},
		{"GET", "/api/devices", ListDevices, ""},
		{"HEAD", "/api/devices", ListDevices, ""},
		{"POST", "/api/devices", CreateDevice, ""},
		{"DELETE", "/api/devices", MethodNotAllowed, "GET, HEAD, POST"},
		{"get", "/api/devices", MethodNotAllowed, "GET, HEAD, POST"}, // methods are case-sensitive
		{"GET", "/api/devices/", NotFound, ""},
		{"GET", "/", NotFound, ""},
		{"POST", "/nope", NotFound, ""},
	}
	for _, tc := range tests {
		ep, allow := Route(tc.method, tc.path)
		if ep != tc.ep || allow != tc.allow {
			t.Errorf("Route(%s %s) = %v %q, want %v %q", tc.method, tc.path, ep, allow, tc.ep, tc.allow)
		}
	}
}

func TestStatic(t *testing.T) {
	a := New(nil, nil)
	tests := []struct {
		ep     Endpoint
		allow  string
		status int
		body   string
	}{
		{Healthz, "", 200, `{"status":"ok"}`},
		{ListDevices, "", 200, string(devices.ListJSON())},
		{NotFound, "", 404, `{"error":"not found"}`},
		{MethodNotAllowed, "GET, HEAD", 405, `{"error":"method not allowed"}`},
	}
	for _, tc := range tests {
		r := a.Static(tc.ep, tc.allow)
		if r.Status != tc.status || string(r.Body) != tc.body || r.Allow != tc.allow {
			t.Errorf("Static(%v) = %d %s %q", tc.ep, r.Status, r.Body, r.Allow)
		}
	}
}

type fakeDB struct {
	id  int64
	err error
}

func (f fakeDB) Insert(_ context.Context, _, _ string) (int64, error) { return f.id, f.err }

func TestCreate(t *testing.T) {
	quiet := log.New(io.Discard, "", 0)
	unavailable := fmt.Errorf("insert: %w: %w", store.ErrUnavailable, errors.New("refused"))
	tests := []struct {
		name   string
		db     Inserter
		body   string
		status int
		want   string
	}{
		{"no database", nil, `{"mac":"a","firmware":"b"}`, 503, `{"error":"no database configured (--database-url)"}`},
		{"created", fakeDB{id: 7}, `{"mac":"a","firmware":"b"}`, 201, `{"id":7,"mac":"a","firmware":"b"}`},
		{"invalid", fakeDB{id: 7}, `{"mac":1}`, 400, `{"error":"mac must be a string"}`},
		{"invalid without database", nil, `{"mac":1}`, 400, `{"error":"mac must be a string"}`},
		{"db down", fakeDB{err: unavailable}, `{"mac":"a","firmware":"b"}`, 503, `{"error":"database unavailable"}`},
		{"db timeout", fakeDB{err: context.DeadlineExceeded}, `{"mac":"a","firmware":"b"}`, 503, `{"error":"database unavailable"}`},
		{"db error", fakeDB{err: errors.New("relation missing")}, `{"mac":"a","firmware":"b"}`, 500, `{"error":"database error"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := New(tc.db, quiet)
			d, r := a.PrepareCreate([]byte(tc.body))
			if r == nil {
				resp := a.Create(context.Background(), d)
				r = &resp
			}
			if r.Status != tc.status || string(r.Body) != tc.want {
				t.Fatalf("got %d %s, want %d %s", r.Status, r.Body, tc.status, tc.want)
			}
		})
	}
}

func TestTooLarge(t *testing.T) {
	if r := TooLarge(); r.Status != 413 || string(r.Body) != `{"error":"request body larger than 1024 bytes"}` {
		t.Fatalf("TooLarge() = %d %s", r.Status, r.Body)
	}
}

// hangingDB never answers: like a database that stopped responding.
type hangingDB struct{}

func (hangingDB) Insert(ctx context.Context, _, _ string) (int64, error) {
	<-ctx.Done()
	return 0, ctx.Err()
}

func TestCreateGivesUpAfterTheTimeout(t *testing.T) {
	a := New(hangingDB{}, log.New(io.Discard, "", 0))
	a.timeout = 20 * time.Millisecond
	start := time.Now()
	r := a.Create(context.Background(), devices.New{MAC: "a", Firmware: "b"})
	if r.Status != 503 || string(r.Body) != `{"error":"database unavailable"}` {
		t.Fatalf("got %d %s, want 503", r.Status, r.Body)
	}
	// Generous bound: the point is that it returns at all, not how fast.
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("Create took %v with a 20ms timeout", waited)
	}
}
