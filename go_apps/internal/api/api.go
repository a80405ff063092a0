// Package api is the server-independent half of the HTTP contract: routing,
// status codes and JSON bodies. gnetserver and nethttpserver only add framing,
// so both answer every request with the same status and bytes.
package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"polyperf/go_apps/internal/config"
	"polyperf/go_apps/internal/devices"
	"polyperf/go_apps/internal/store"
)

const (
	// MaxBodyBytes is the largest request body accepted; larger ones get 413.
	MaxBodyBytes = 1024
	// ContentType is the type of every answer.
	ContentType = "application/json"
)

// Endpoint is what a (method, path) pair resolves to.
type Endpoint uint8

// Endpoints; the zero value is NotFound.
const (
	NotFound Endpoint = iota
	MethodNotAllowed
	Healthz
	ListDevices
	CreateDevice
)

// Allow header values for the two known paths (HEAD is served wherever GET is).
const (
	allowHealthz = "GET, HEAD"
	allowDevices = "GET, HEAD, POST"
)

// Route resolves a request; allow is set for MethodNotAllowed. path excludes the query.
func Route(method, path string) (ep Endpoint, allow string) {
	switch path {
	case "/healthz":
		if method == http.MethodGet || method == http.MethodHead {
			return Healthz, ""
		}
		return MethodNotAllowed, allowHealthz
	case "/api/devices":
		switch method {
		case http.MethodGet, http.MethodHead:
			return ListDevices, ""
		case http.MethodPost:
			return CreateDevice, ""
		}
		return MethodNotAllowed, allowDevices
	}
	return NotFound, ""
}

// Response is a status and JSON body; Allow is non-empty only for 405.
type Response struct {
	Status int
	Body   []byte
	Allow  string
}

// Error builds {"error": reason}.
func Error(status int, reason string) Response {
	b, _ := json.Marshal(struct {
		Error string `json:"error"`
	}{reason}) // cannot fail for a string field
	return Response{Status: status, Body: b}
}

// Answers that never change, built once.
var (
	healthzResp  = Response{Status: http.StatusOK, Body: []byte(`{"status":"ok"}`)}
	listResp     = Response{Status: http.StatusOK, Body: devices.ListJSON()}
	notFoundResp = Error(http.StatusNotFound, "not found")
	noDBResp     = Error(http.StatusServiceUnavailable, "no database configured (--database-url)")
	tooLargeResp = Error(http.StatusRequestEntityTooLarge, fmt.Sprintf("request body larger than %d bytes", MaxBodyBytes))
	methodBody   = Error(http.StatusMethodNotAllowed, "method not allowed").Body
)

// TooLarge is the 413 answer for bodies over MaxBodyBytes.
func TooLarge() Response { return tooLargeResp }

// Inserter stores a device and returns its id; *store.Store is one.
type Inserter interface {
	Insert(ctx context.Context, mac, firmware string) (int64, error)
}

// App answers requests. A nil Inserter means no database: POST answers 503.
type App struct {
	db      Inserter
	log     *log.Logger
	timeout time.Duration // bounds a POST's pool wait, connect and INSERT together
	lastLog atomic.Int64  // unix seconds of the last logged DB error
	extra   int           // heap allocations added to every list request (a test's flag; 0 otherwise)
}

// allocSink keeps the test-only extra allocations on the heap.
var allocSink atomic.Pointer[[16]byte]

// SetExtraAllocs makes every GET /api/devices allocate n more heap objects: only
// the test proving that a CI gate sees one more allocation per request sets it.
func (a *App) SetExtraAllocs(n int) { a.extra = n }

// New builds an App over db (may be nil) with the default database timeout.
func New(db Inserter, logger *log.Logger) *App {
	return &App{db: db, log: logger, timeout: config.DefaultDBTimeout}
}

// Static answers every endpoint except CreateDevice, without blocking.
func (a *App) Static(ep Endpoint, allow string) Response {
	switch ep {
	case Healthz:
		return healthzResp
	case ListDevices:
		for range a.extra {
			allocSink.Store(new([16]byte))
		}
		return listResp
	case MethodNotAllowed:
		return Response{Status: http.StatusMethodNotAllowed, Body: methodBody, Allow: allow}
	}
	return notFoundResp
}

// PrepareCreate validates a POST body. A non-nil answer (400 or 503) is final;
// otherwise the caller runs Create, possibly off its event loop. The returned
// strings are copies, so body may be reused afterwards. Validation comes first:
// a bad body is the client's error (400) whether or not a database is configured.
func (a *App) PrepareCreate(body []byte) (devices.New, *Response) {
	d, err := devices.Parse(body)
	if err != nil {
		r := Error(http.StatusBadRequest, err.Error())
		return devices.New{}, &r
	}
	if a.db == nil {
		return devices.New{}, &noDBResp
	}
	return d, nil
}

// Create inserts a validated device; it blocks on the database.
func (a *App) Create(ctx context.Context, d devices.New) Response {
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	id, err := a.db.Insert(ctx, d.MAC, d.Firmware)
	if err != nil {
		a.logDBError(err)
		if errors.Is(err, store.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
			return Error(http.StatusServiceUnavailable, "database unavailable")
		}
		return Error(http.StatusInternalServerError, "database error")
	}
	return Response{Status: http.StatusCreated, Body: devices.Device{ID: id, MAC: d.MAC, Firmware: d.Firmware}.JSON()}
}

// logDBError logs at most one line a second: a dead database under load
// would otherwise flood stderr and skew the benchmark.
func (a *App) logDBError(err error) {
	now := time.Now().Unix()
	last := a.lastLog.Load()
	if now > last && a.lastLog.CompareAndSwap(last, now) && a.log != nil {
		// pgx lists one line per connect attempt; keep the log one line per event.
		a.log.Printf("POST /api/devices: %s", strings.Join(strings.Fields(err.Error()), " "))
	}
}
