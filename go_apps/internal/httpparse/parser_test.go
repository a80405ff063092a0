package httpparse

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// result summarises what a connection saw: requests, then an optional error.
type result struct {
	Reqs   []string
	Status int // 0: no error
	Rest   int // unconsumed bytes at the end
}

func summary(r Request) string {
	return fmt.Sprintf("%s %s path=%q 1.%d keep=%v body=%q", r.Method, r.Target, r.Path, r.Minor, r.KeepAlive, r.Body)
}

// feed simulates a connection receiving data in chunks of size chunk
// (0: all at once), consuming only what complete requests used.
func feed(data []byte, chunk int, lim Limits) result {
	p := NewParser(lim)
	var res result
	var buf []byte
	if chunk <= 0 {
		chunk = len(data) + 1
	}
	for off := 0; off < len(data); off += chunk {
		buf = append(buf, data[off:min(off+chunk, len(data))]...)
		for len(buf) > 0 {
			req, n, err := p.Parse(buf)
			if err != nil {
				res.Status = err.(*Error).Status
				return res
			}
			if n == 0 {
				break
			}
			res.Reqs = append(res.Reqs, summary(req))
			buf = buf[n:]
		}
	}
	res.Rest = len(buf)
	return res
}

func TestParseSingle(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string // summary; "" means incomplete
	}{
		{"get", "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", `GET /healthz path="/healthz" 1.1 keep=true body=""`},
		{"query stripped", "GET /api/devices?a=1#f HTTP/1.1\r\nHost: x\r\n\r\n", `GET /api/devices?a=1#f path="/api/devices" 1.1 keep=true body=""`},
		{"post body", "POST /api/devices HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", `POST /api/devices path="/api/devices" 1.1 keep=true body="hello"`},
		{"case-insensitive names", "POST / HTTP/1.1\r\nhOsT: x\r\ncOnTeNt-LeNgTh:   2  \r\n\r\nab", `POST / path="/" 1.1 keep=true body="ab"`},
		{"close", "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", `GET / path="/" 1.1 keep=false body=""`},
		{"close in list", "GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade , CLOSE\r\n\r\n", `GET / path="/" 1.1 keep=false body=""`},
		{"1.0 closes", "GET / HTTP/1.0\r\n\r\n", `GET / path="/" 1.0 keep=false body=""`},
		{"1.0 keep-alive", "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", `GET / path="/" 1.0 keep=true body=""`},
		{"1.2 treated as 1.1", "GET / HTTP/1.2\r\nHost: x\r\n\r\n", `GET / path="/" 1.1 keep=true body=""`},
		{"bare LF", "GET / HTTP/1.1\nHost: x\n\n", `GET / path="/" 1.1 keep=true body=""`},
		{"leading blank lines", "\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n", `GET / path="/" 1.1 keep=true body=""`},
		{"absolute form", "GET http://h:1/healthz?x HTTP/1.1\r\nHost: h\r\n\r\n", `GET http://h:1/healthz?x path="/healthz" 1.1 keep=true body=""`},
		{"absolute no path", "GET http://h HTTP/1.1\r\nHost: h\r\n\r\n", `GET http://h path="" 1.1 keep=true body=""`},
		{"asterisk", "OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n", `OPTIONS * path="" 1.1 keep=true body=""`},
		{"odd method", "BREW /pot HTTP/1.1\r\nHost: h\r\n\r\n", `BREW /pot path="/pot" 1.1 keep=true body=""`},
		{"same length twice", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nz", `POST / path="/" 1.1 keep=true body="z"`},
		{"empty header value", "GET / HTTP/1.1\r\nHost: x\r\nX-Empty:\r\n\r\n", `GET / path="/" 1.1 keep=true body=""`},
		{"body at limit", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1024\r\n\r\n" + strings.Repeat("a", 1024), `POST / path="/" 1.1 keep=true body="` + strings.Repeat("a", 1024) + `"`},
		{"head incomplete", "GET / HTTP/1.1\r\nHost: x\r\n", ""},
		{"body incomplete", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhel", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := NewParser(DefaultLimits)
			req, n, err := p.Parse([]byte(tc.in))
			if err != nil {
				t.Fatalf("unexpected error %v", err)
			}
			if tc.want == "" {
				if n != 0 {
					t.Fatalf("complete after %d bytes, want incomplete", n)
				}
				return
			}
			if n != len(tc.in) || summary(req) != tc.want {
				t.Fatalf("got n=%d %s\nwant n=%d %s", n, summary(req), len(tc.in), tc.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	long := strings.Repeat("a", 9000)
	manyHeaders := strings.Repeat("X-A: 1\r\n", 65)
	// Bad requests like contracttest's framing cases: these test the parser, those every app on the wire.
	tests := []struct {
		name   string
		in     string
		status int
	}{
		{"no spaces", "GET\r\n\r\n", 400},
		{"one space", "GET /\r\n\r\n", 400},
		{"double space", "GET  / HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"trailing space", "GET / HTTP/1.1 \r\nHost: x\r\n\r\n", 400},
		{"bad method", "G(T / HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"bad version", "GET / HTTQ/1.1\r\nHost: x\r\n\r\n", 400},
		{"version garbage", "GET / HTTP/1.x\r\nHost: x\r\n\r\n", 400},
		{"http2", "GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505},
		{"http0.9", "GET / HTTP/0.9\r\n\r\n", 505},
		{"control in target", "GET /a\x01b HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"relative target", "GET healthz HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"bare CR", "GET / HTTP/1.1\rHost: x\r\n\r\n", 400},
		{"obs fold", "GET / HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n  2\r\n\r\n", 400},
		{"space before colon", "GET / HTTP/1.1\r\nHost : x\r\n\r\n", 400},
		{"no colon", "GET / HTTP/1.1\r\nHost x\r\n\r\n", 400},
		{"empty name", "GET / HTTP/1.1\r\n: x\r\n\r\n", 400},
		{"NUL in value", "GET / HTTP/1.1\r\nHost: x\x00y\r\n\r\n", 400},
		{"missing host", "GET / HTTP/1.1\r\n\r\n", 400},
		{"duplicate host", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400},
		{"negative length", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", 400},
		{"list length", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1, 1\r\n\r\n", 400},
		{"empty length", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length:\r\n\r\n", 400},
		{"conflicting lengths", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 400},
		{"te and length", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", 400},
		{"chunked", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", 501},
		{"body over limit", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1025\r\n\r\n", 413},
		{"10 GB length", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000000\r\n\r\n", 413},
		{"overflowing length", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999999\r\n\r\n", 413},
		{"long request line", "GET /" + long + " HTTP/1.1\r\nHost: x\r\n\r\n", 414},
		{"long request line, no newline yet", "GET /" + long, 414},
		{"long header", "GET / HTTP/1.1\r\nHost: x\r\nX-A: " + long + "\r\n\r\n", 431},
		{"long header, no newline yet", "GET / HTTP/1.1\r\nHost: x\r\nX-A: " + long, 431},
		{"too many headers", "GET / HTTP/1.1\r\nHost: x\r\n" + manyHeaders + "\r\n", 431},
		{"binary garbage", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n", 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, chunk := range []int{0, 1, 7} {
				if got := feed([]byte(tc.in), chunk, DefaultLimits); got.Status != tc.status {
					t.Fatalf("chunk %d: got %+v, want status %d", chunk, got, tc.status)
				}
			}
		})
	}
}

func TestPipelining(t *testing.T) {
	stream := "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" +
		"POST /api/devices HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}" +
		"GET /api/devices HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" +
		"GET /partial HTTP/1.1\r\n"
	want := result{Reqs: []string{
		`GET /healthz path="/healthz" 1.1 keep=true body=""`,
		`POST /api/devices path="/api/devices" 1.1 keep=true body="{}"`,
		`GET /api/devices path="/api/devices" 1.1 keep=false body=""`,
	}, Rest: len("GET /partial HTTP/1.1\r\n")}
	for _, chunk := range []int{0, 1, 2, 3, 5, 13, 64} {
		if got := feed([]byte(stream), chunk, DefaultLimits); !reflect.DeepEqual(got, want) {
			t.Fatalf("chunk %d:\n got %+v\nwant %+v", chunk, got, want)
		}
	}
}

// TestEverySplitPoint delivers a two-request stream as two reads, split at
// every possible offset; the outcome must not depend on where it was cut.
func TestEverySplitPoint(t *testing.T) {
	stream := []byte("POST /api/devices HTTP/1.1\r\nHost: x\r\nContent-Length: 33\r\n\r\n" +
		`{"mac":"AA-BB","firmware":"1.0"}` + "\n" +
		"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	want := feed(stream, 0, DefaultLimits)
	if len(want.Reqs) != 2 || want.Rest != 0 {
		t.Fatalf("whole stream: %+v", want)
	}
	for cut := 0; cut <= len(stream); cut++ {
		p := NewParser(DefaultLimits)
		var got []string
		buf := append([]byte(nil), stream[:cut]...)
		for _, more := range [][]byte{nil, stream[cut:]} {
			buf = append(buf, more...)
			for {
				req, n, err := p.Parse(buf)
				if err != nil {
					t.Fatalf("cut %d: %v", cut, err)
				}
				if n == 0 {
					break
				}
				got = append(got, summary(req))
				buf = buf[n:]
			}
		}
		if !reflect.DeepEqual(got, want.Reqs) || len(buf) != 0 {
			t.Fatalf("cut %d: got %q rest %d", cut, got, len(buf))
		}
	}
}

func TestWantsContinue(t *testing.T) {
	p := NewParser(DefaultLimits)
	head := "POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n"
	if p.WantsContinue() {
		t.Fatal("WantsContinue before the head")
	}
	if _, n, err := p.Parse([]byte(head)); n != 0 || err != nil {
		t.Fatalf("head alone: n=%d err=%v", n, err)
	}
	if !p.WantsContinue() || p.WantsContinue() {
		t.Fatal("WantsContinue should be true exactly once")
	}
	if _, n, err := p.Parse([]byte(head + "ok")); n != len(head)+2 || err != nil {
		t.Fatalf("with body: n=%d err=%v", n, err)
	}
	if p.WantsContinue() {
		t.Fatal("WantsContinue after the request completed")
	}
}

func TestParseNoAllocForKnownMethod(t *testing.T) {
	in := []byte("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	p := NewParser(DefaultLimits)
	allocs := testing.AllocsPerRun(100, func() {
		if _, n, _ := p.Parse(in); n != len(in) {
			t.Fatal("incomplete")
		}
	})
	if allocs > 1 { // the target string
		t.Fatalf("%.0f allocations per GET, want <= 1", allocs)
	}
}
