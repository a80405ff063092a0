package nethttpserver

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"polyperf/go_apps/internal/api"
	"polyperf/go_apps/internal/config"
	"polyperf/go_apps/internal/contracttest"
)

var testCfg = config.Config{AppName: "nethttp_devices", Host: "127.0.0.1", Port: 0, PoolSize: 4, Table: "t"}

func start(t *testing.T, app *api.App) string {
	t.Helper()
	return contracttest.Serve(t, New(testCfg, app, contracttest.Quiet).Run)
}

func TestContract(t *testing.T) {
	contracttest.Run(t, "nethttp_devices", contracttest.StartBoth(t, start))
}

// TestHandlerChunked: unlike the gnet server, net/http decodes chunked bodies;
// the 1 KiB limit still applies to the decoded body.
func TestHandlerChunked(t *testing.T) {
	h := New(testCfg, api.New(&contracttest.SlowDB{}, contracttest.Quiet), contracttest.Quiet).Handler()
	for _, tc := range []struct {
		body   string
		status int
	}{
		{`{"mac":"a","firmware":"b"}`, 201},
		{strings.Repeat(" ", 2000), 413},
	} {
		req := httptest.NewRequest(http.MethodPost, "/api/devices", strings.NewReader(tc.body))
		req.ContentLength = -1 // unknown length, as with Transfer-Encoding: chunked
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.status {
			t.Errorf("body of %d bytes: status %d, want %d (%s)", len(tc.body), rec.Code, tc.status, rec.Body)
		}
	}
}

// TestHandlerWithTestSlowdown: the calibration knob only adds time; every
// answer stays the same.
func TestHandlerWithTestSlowdown(t *testing.T) {
	app := api.New(&contracttest.SlowDB{}, contracttest.Quiet)
	slowed := testCfg
	slowed.SlowdownPct = 50
	for _, target := range []string{"/", "/api/devices", "/nope"} {
		plain, padded := httptest.NewRecorder(), httptest.NewRecorder()
		New(testCfg, app, contracttest.Quiet).Handler().ServeHTTP(plain, httptest.NewRequest(http.MethodGet, target, nil))
		New(slowed, app, contracttest.Quiet).Handler().ServeHTTP(padded, httptest.NewRequest(http.MethodGet, target, nil))
		if plain.Code != padded.Code || plain.Body.String() != padded.Body.String() {
			t.Errorf("%s: %d %q with the knob, %d %q without", target, padded.Code, padded.Body, plain.Code, plain.Body)
		}
	}
}
