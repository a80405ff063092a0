// Package contracttest checks a running server against the HTTP contract the
// Python harness and the Rust fleet rely on, over raw TCP so that framing
// (pipelining, split writes, closes) is tested, not just handlers. Both
// server packages run the same suite from their tests.
package contracttest

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

const ioTimeout = 5 * time.Second

// client is one raw connection.
type client struct {
	t    *testing.T
	conn net.Conn
	r    *bufio.Reader
}

func dial(t *testing.T, addr string) *client {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, ioTimeout)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(ioTimeout))
	return &client{t: t, conn: conn, r: bufio.NewReader(conn)}
}

func (c *client) send(s string) {
	c.t.Helper()
	if _, err := io.WriteString(c.conn, s); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// sendBytewise writes s one byte per write, with TCP_NODELAY so each byte
// is its own segment and the server sees many partial reads.
func (c *client) sendBytewise(s string) {
	c.t.Helper()
	if tc, ok := c.conn.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	for i := range len(s) {
		c.send(s[i : i+1])
		if i%16 == 0 {
			time.Sleep(time.Millisecond) // let some bytes arrive alone
		}
	}
}

// response is a read answer with its body.
type response struct {
	*http.Response
	body string
}

// read reads one answer to a request with the given method.
func (c *client) read(method string) response {
	c.t.Helper()
	resp, err := http.ReadResponse(c.r, &http.Request{Method: method})
	if err != nil {
		c.t.Fatalf("read response: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("read body: %v", err)
	}
	return response{resp, string(b)}
}

// expectClosed asserts the server closes the connection without sending more.
func (c *client) expectClosed() {
	c.t.Helper()
	b, err := c.r.ReadByte()
	if err == nil {
		c.t.Fatalf("connection still open: read %q", b)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		c.t.Fatalf("connection not closed within %v", ioTimeout)
	}
}

// expectOpen asserts the connection still answers.
func (c *client) expectOpen() {
	c.t.Helper()
	c.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	if r := c.read("GET"); r.StatusCode != 200 {
		c.t.Fatalf("follow-up request: status %d", r.StatusCode)
	}
}
