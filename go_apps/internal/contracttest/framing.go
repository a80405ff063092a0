package contracttest

import (
	"encoding/json"
	"strings"
	"testing"
)

// runFraming checks connection-level behaviour: pipelining, partial reads,
// refusals that must close the connection.
func runFraming(t *testing.T, appName string, s Servers) {
	t.Run("pipelined GETs in one write", func(t *testing.T) {
		c := dial(t, s.NoDB)
		c.send(get("/healthz") + get("/api/devices") + get("/nope") + get("/healthz"))
		for i, want := range []int{200, 200, 404, 200} {
			if r := c.read("GET"); r.StatusCode != want {
				t.Fatalf("answer %d: status %d, want %d", i, r.StatusCode, want)
			}
		}
		c.expectOpen()
	})

	t.Run("request split into 1-byte writes", func(t *testing.T) {
		c := dial(t, s.WithDB)
		c.sendBytewise(post("/api/devices", `{"mac":"AA","firmware":"1"}`) + get("/healthz"))
		if r := c.read("POST"); r.StatusCode != 201 {
			t.Fatalf("POST status %d: %s", r.StatusCode, r.body)
		}
		if r := c.read("GET"); r.StatusCode != 200 {
			t.Fatalf("GET status %d", r.StatusCode)
		}
	})

	t.Run("pipelined POSTs answered in order", func(t *testing.T) {
		c := dial(t, s.WithDB)
		var batch strings.Builder
		macs := []string{"M1", "M2", "M3"}
		for _, m := range macs {
			batch.WriteString(post("/api/devices", `{"mac":"`+m+`","firmware":"f"}`))
			batch.WriteString(get("/healthz"))
		}
		c.send(batch.String())
		lastID := int64(0)
		for _, m := range macs {
			r := c.read("POST")
			var d struct {
				ID  int64  `json:"id"`
				MAC string `json:"mac"`
			}
			if err := json.Unmarshal([]byte(r.body), &d); err != nil || r.StatusCode != 201 || d.MAC != m || d.ID <= lastID {
				t.Fatalf("POST %s: status %d body %s (after id %d)", m, r.StatusCode, r.body, lastID)
			}
			lastID = d.ID
			if r := c.read("GET"); r.StatusCode != 200 || r.body != `{"status":"ok"}` {
				t.Fatalf("GET after POST %s: status %d body %s", m, r.StatusCode, r.body)
			}
		}
	})

	t.Run("POST with Connection close", func(t *testing.T) {
		c := dial(t, s.WithDB)
		req := strings.Replace(post("/api/devices", `{"mac":"C","firmware":"1"}`), "\r\n\r\n", "\r\nConnection: close\r\n\r\n", 1)
		c.send(req + get("/healthz"))                             // the GET after "close" must not be answered
		if r := c.read("POST"); r.StatusCode != 201 || !r.Close { // ReadResponse turns "Connection: close" into Close
			t.Fatalf("status %d, Close %v", r.StatusCode, r.Close)
		}
		c.expectClosed()
	})

	t.Run("Expect 100-continue", func(t *testing.T) {
		c := dial(t, s.WithDB)
		body := `{"mac":"E","firmware":"1"}`
		c.send("POST /api/devices HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 26\r\n\r\n")
		if r := c.read("POST"); r.StatusCode != 100 {
			t.Fatalf("interim status %d, want 100", r.StatusCode)
		}
		c.send(body)
		if r := c.read("POST"); r.StatusCode != 201 {
			t.Fatalf("status %d: %s", r.StatusCode, r.body)
		}
	})

	t.Run("large upload refused without reset", func(t *testing.T) {
		c := dial(t, s.WithDB)
		c.send("POST /api/devices HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000000\r\n\r\n" + strings.Repeat("x", 64<<10))
		r := c.read("POST")
		checkHeaders(t, appName, r)
		if r.StatusCode != 413 {
			t.Fatalf("status %d, want 413", r.StatusCode)
		}
		c.expectClosed()
	})

	// Protocol errors: net/http answers these in plain text before any
	// handler runs, so only the status and the close are common.
	for _, tc := range []struct {
		name, req string
		status    int
	}{
		{"malformed request line", "GARBAGE\r\n\r\n", 400},
		{"space in target", "GET /a b HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"header name with space", "GET / HTTP/1.1\r\nHost: x\r\nBad Name: 1\r\n\r\n", 400},
		{"missing Host", "GET /healthz HTTP/1.1\r\n\r\n", 400},
		{"bad Content-Length", "POST /api/devices HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n", 400},
		{"header over 8 KiB", "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 9<<10) + "\r\n\r\n", 431},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, s.NoDB)
			c.send(tc.req)
			if r := c.read("GET"); r.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", r.StatusCode, tc.status)
			}
			c.expectClosed()
		})
	}
}
