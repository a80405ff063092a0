package httpparse

import (
	"reflect"
	"testing"
)

// FuzzParse checks that arbitrary bytes never panic, that consumed lengths
// stay in bounds, and that delivering the input byte by byte or in odd chunks
// gives the same requests and the same error as delivering it whole.
// Run: go test -fuzz=FuzzParse ./internal/httpparse
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST /api/devices HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}GET / HTTP/1.0\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n",
		"\r\nGET http://a/b?c HTTP/1.1\nHost: a\nExpect: 100-continue\nContent-Length: 3\n\nabc",
		"GET / HTTP/2.0\r\n\r\n",
	} {
		f.Add([]byte(s), uint8(3))
	}
	lim := Limits{MaxHeadBytes: 256, MaxHeaders: 8, MaxBodyBytes: 64} // small, so limits are reached
	f.Fuzz(func(t *testing.T, data []byte, chunk uint8) {
		whole := feed(data, 0, lim)
		for _, c := range []int{1, int(chunk%17) + 2} {
			if got := feed(data, c, lim); !reflect.DeepEqual(got, whole) {
				t.Fatalf("chunk %d:\n got %+v\nwhole %+v", c, got, whole)
			}
		}
		p := NewParser(lim)
		req, n, err := p.Parse(data)
		if n < 0 || n > len(data) || (err != nil && n != 0) {
			t.Fatalf("n=%d len=%d err=%v", n, len(data), err)
		}
		if int64(len(req.Body)) > lim.MaxBodyBytes {
			t.Fatalf("body of %d bytes exceeds the limit", len(req.Body))
		}
		if e, ok := err.(*Error); err != nil && (!ok || e.Status < 400 || e.Status > 505) {
			t.Fatalf("bad error %#v", err)
		}
	})
}
