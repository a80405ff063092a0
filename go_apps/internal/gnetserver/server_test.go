package gnetserver

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"polyperf/go_apps/internal/api"
	"polyperf/go_apps/internal/config"
	"polyperf/go_apps/internal/contracttest"
)

func start(t *testing.T, app *api.App) string {
	t.Helper()
	cfg := config.Config{AppName: "gnet_devices", Host: "127.0.0.1", Port: 0, Workers: 2, PoolSize: 4, Table: "t"}
	return contracttest.Serve(t, New(cfg, app, contracttest.Quiet).Run)
}

func TestContract(t *testing.T) {
	contracttest.Run(t, "gnet_devices", contracttest.StartBoth(t, start))
}

func TestChunkedRefused(t *testing.T) {
	addr := start(t, api.New(&contracttest.SlowDB{}, contracttest.Quiet))
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	_, _ = io.WriteString(conn, "POST /api/devices HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{}\n\r\n0\r\n\r\n")
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 501 || !strings.Contains(string(body), "Transfer-Encoding") {
		t.Fatalf("status %d body %s", resp.StatusCode, body)
	}
	if _, err := r.ReadByte(); err == nil {
		t.Fatal("connection left open after 501")
	}
}

func TestAppendResponse(t *testing.T) {
	s := &Server{cfg: config.Config{AppName: "gnet_devices"}}
	const date = "Sat, 01 Jan 2000 00:00:00 GMT"
	head := "Server: gnet_devices\r\nDate: " + date + "\r\nContent-Type: application/json\r\n"
	tests := []struct {
		name string
		resp api.Response
		f    frame
		want string
	}{
		{"keep-alive", api.Response{Status: 200, Body: []byte(`{}`)}, frame{keepAlive: true},
			"HTTP/1.1 200 OK\r\n" + head + "Content-Length: 2\r\n\r\n{}"},
		{"close", api.Response{Status: 404, Body: []byte(`{}`)}, frame{},
			"HTTP/1.1 404 Not Found\r\n" + head + "Content-Length: 2\r\nConnection: close\r\n\r\n{}"},
		{"http/1.0 keep-alive", api.Response{Status: 200, Body: []byte(`{}`)}, frame{keepAlive: true, http10: true},
			"HTTP/1.1 200 OK\r\n" + head + "Content-Length: 2\r\nConnection: keep-alive\r\n\r\n{}"},
		{"head with allow", api.Response{Status: 405, Body: []byte(`{}`), Allow: "GET, HEAD"}, frame{keepAlive: true, head: true},
			"HTTP/1.1 405 Method Not Allowed\r\n" + head + "Content-Length: 2\r\nAllow: GET, HEAD\r\n\r\n"},
	}
	for _, tc := range tests {
		if got := string(s.appendResponse(nil, date, tc.resp, tc.f)); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
}
