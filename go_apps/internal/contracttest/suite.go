package contracttest

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"polyperf/go_apps/internal/api"
	"polyperf/go_apps/internal/devices"
)

// Start runs a server for app on 127.0.0.1:0 until t ends and returns its host:port.
type Start func(t *testing.T, app *api.App) string

// RunFunc is a server's Run method (cli.Server): it serves until ctx is done,
// calling ready with the bound host:port once it listens.
type RunFunc func(ctx context.Context, ready func(addr string)) error

// Serve runs run until t ends and returns the address it listens on. A server
// that fails to start, or does not start within 10 s, fails t at once; one that
// stops with an error when t ends fails t then.
func Serve(t *testing.T, run RunFunc) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addrc, errc := make(chan string, 1), make(chan error, 1)
	go func() { errc <- run(ctx, func(a string) { addrc <- a }) }()
	select {
	case addr := <-addrc:
		t.Cleanup(func() {
			cancel()
			if err := <-errc; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
		return addr
	case err := <-errc:
		cancel()
		t.Fatalf("Run: %v", err)
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatal("server did not start")
	}
	return ""
}

// SlowDB is an in-memory api.Inserter that takes Delay per insert, long
// enough that pipelined requests queue behind an in-flight POST.
type SlowDB struct {
	Delay time.Duration
	last  atomic.Int64
}

// Insert returns ids 1, 2, 3, ...
func (d *SlowDB) Insert(ctx context.Context, _, _ string) (int64, error) {
	select {
	case <-time.After(d.Delay):
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return d.last.Add(1), nil
}

// Quiet discards the App's logging in tests.
var Quiet = log.New(io.Discard, "", 0)

// Servers holds one server without and one with a (fake) database.
type Servers struct{ NoDB, WithDB string }

// StartBoth starts the two servers the suite needs.
func StartBoth(t *testing.T, start Start) Servers {
	return Servers{
		NoDB:   start(t, api.New(nil, Quiet)),
		WithDB: start(t, api.New(&SlowDB{Delay: 30 * time.Millisecond}, Quiet)),
	}
}

func get(path string) string { return "GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n" }

func post(path, body string) string {
	return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", path, len(body), body)
}

// checkHeaders asserts the headers every answer must carry.
func checkHeaders(t *testing.T, appName string, r response) {
	t.Helper()
	if got := r.Header.Get("Server"); got != appName {
		t.Errorf("Server = %q, want %q", got, appName)
	}
	if got := r.Header.Get("Content-Type"); got != api.ContentType {
		t.Errorf("Content-Type = %q", got)
	}
	if r.Header.Get("Content-Length") == "" {
		t.Error("no Content-Length")
	}
	date, err := http.ParseTime(r.Header.Get("Date"))
	if err != nil || time.Since(date).Abs() > 3*time.Second {
		t.Errorf("Date = %q (%v), not current", r.Header.Get("Date"), err)
	}
}

// Run checks the behaviour both servers share.
func Run(t *testing.T, appName string, s Servers) {
	list := string(devices.ListJSON())
	tests := []struct {
		name     string
		withDB   bool
		req      string
		status   int
		body     string
		allow    string
		closes   bool
		headOnly bool
	}{
		{name: "healthz", req: get("/healthz"), status: 200, body: `{"status":"ok"}`},
		{name: "devices", req: get("/api/devices"), status: 200, body: list},
		{name: "devices with query", req: get("/api/devices?page=2"), status: 200, body: list},
		{name: "head", req: "HEAD /api/devices HTTP/1.1\r\nHost: x\r\n\r\n", status: 200, headOnly: true},
		{name: "405 healthz", req: post("/healthz", ""), status: 405, body: `{"error":"method not allowed"}`, allow: "GET, HEAD"},
		{name: "405 devices", req: "DELETE /api/devices HTTP/1.1\r\nHost: x\r\n\r\n", status: 405, body: `{"error":"method not allowed"}`, allow: "GET, HEAD, POST"},
		{name: "404", req: get("/nope"), status: 404, body: `{"error":"not found"}`},
		{name: "404 trailing slash", req: get("/api/devices/"), status: 404, body: `{"error":"not found"}`},
		{name: "post without db", req: post("/api/devices", `{"mac":"a","firmware":"b"}`), status: 503, body: `{"error":"no database configured (--database-url)"}`},
		{name: "post created", withDB: true, req: post("/api/devices", `{"mac":"AA-BB","firmware":"1.0"}`), status: 201, body: `{"id":*,"mac":"AA-BB","firmware":"1.0"}`},
		{name: "post malformed", withDB: true, req: post("/api/devices", `{"mac":`), status: 400, body: `{"error":"malformed JSON"}`},
		{name: "post empty body", withDB: true, req: post("/api/devices", ``), status: 400, body: `{"error":"malformed JSON"}`},
		{name: "post wrong type", withDB: true, req: post("/api/devices", `{"mac":"a","firmware":2}`), status: 400, body: `{"error":"firmware must be a string"}`},
		{name: "post mac too long", withDB: true, req: post("/api/devices", `{"mac":"123456789012345678","firmware":"1"}`), status: 400, body: `{"error":"mac longer than 17 characters"}`},
		{name: "post body over 1 KiB", withDB: true, req: post("/api/devices", strings.Repeat(" ", 1025)), status: 413, body: `{"error":"request body larger than 1024 bytes"}`, closes: true},
		{name: "post 10 GB length", withDB: true, req: "POST /api/devices HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000000\r\n\r\n", status: 413, closes: true},
		{name: "connection close", req: "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", status: 200, body: `{"status":"ok"}`, closes: true},
		{name: "http/1.0 closes", req: "GET /healthz HTTP/1.0\r\n\r\n", status: 200, body: `{"status":"ok"}`, closes: true},
		{name: "http/1.0 keep-alive", req: "GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", status: 200, body: `{"status":"ok"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			addr := s.NoDB
			if tc.withDB {
				addr = s.WithDB
			}
			c := dial(t, addr)
			c.send(tc.req)
			method, _, _ := strings.Cut(tc.req, " ")
			r := c.read(method)
			checkHeaders(t, appName, r)
			if r.StatusCode != tc.status {
				t.Fatalf("status %d, want %d (body %s)", r.StatusCode, tc.status, r.body)
			}
			if tc.body != "" && !matchBody(r.body, tc.body) {
				t.Errorf("body %s, want %s", r.body, tc.body)
			}
			if tc.headOnly && (r.body != "" || r.ContentLength != int64(len(list))) {
				t.Errorf("HEAD: body %q, Content-Length %d", r.body, r.ContentLength)
			}
			if got := r.Header.Get("Allow"); got != tc.allow {
				t.Errorf("Allow = %q, want %q", got, tc.allow)
			}
			if r.Close != tc.closes {
				t.Errorf("answer says Connection close = %v, want %v", r.Close, tc.closes)
			}
			if tc.closes {
				c.expectClosed()
			} else {
				c.expectOpen()
			}
		})
	}
	runFraming(t, appName, s)
}

// matchBody compares, letting "*" in want stand for a number.
func matchBody(got, want string) bool {
	before, after, ok := strings.Cut(want, "*")
	if !ok {
		return got == want
	}
	mid, found := strings.CutPrefix(got, before)
	if !found || !strings.HasSuffix(mid, after) {
		return false
	}
	num := strings.TrimSuffix(mid, after)
	return num != "" && strings.Trim(num, "0123456789") == ""
}
