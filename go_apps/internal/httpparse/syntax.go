package httpparse

import (
	"bytes"
	"math"
)

// Lexical helpers for RFC 9110/9112 syntax, kept apart from the state machine.

// internedMethods lets common methods skip a string allocation per request.
var internedMethods = func() map[string]string {
	m := map[string]string{}
	for _, s := range []string{"GET", "POST", "HEAD", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE", "CONNECT"} {
		m[s] = s
	}
	return m
}()

// tchar reports whether c may appear in a token (RFC 9110 §5.6.2).
func tchar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	switch c {
	case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
		return true
	}
	return false
}

func isToken(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if !tchar(c) {
			return false
		}
	}
	return true
}

// lowerEq compares ASCII case-insensitively; want must be lower case.
func lowerEq(b []byte, want string) bool {
	if len(b) != len(want) {
		return false
	}
	for i := range b {
		c := b[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != want[i] {
			return false
		}
	}
	return true
}

func parseVersion(v []byte) (minor int, err *Error) {
	if len(v) != 8 || string(v[:5]) != "HTTP/" || v[6] != '.' ||
		v[5] < '0' || v[5] > '9' || v[7] < '0' || v[7] > '9' {
		return 0, errRequestLine
	}
	if v[5] != '1' {
		return 0, errVersion
	}
	return int(min(v[7]-'0', 1)), nil // 1.2+ would be compatible with 1.1
}

// targetPath validates the request target and returns the bounds of its path.
func targetPath(t []byte) (bounds [2]int, ok bool) {
	if len(t) == 0 {
		return bounds, false
	}
	for _, c := range t {
		if c <= ' ' || c == 0x7f {
			return bounds, false
		}
	}
	start := 0
	switch {
	case t[0] == '/': // origin-form
	case len(t) == 1 && t[0] == '*': // asterisk-form (OPTIONS *): no path
		return [2]int{1, 1}, true
	default: // absolute-form: scheme "://" authority [path]
		i := bytes.Index(t, []byte("://"))
		if i <= 0 {
			return bounds, false
		}
		j := bytes.IndexByte(t[i+3:], '/')
		if j < 0 {
			return [2]int{len(t), len(t)}, true // empty path; routes as 404
		}
		start = i + 3 + j
	}
	end := len(t)
	if k := bytes.IndexAny(t[start:], "?#"); k >= 0 {
		end = start + k
	}
	return [2]int{start, end}, true
}

// parseLength accepts 1*DIGIT; values too big for int64 become MaxInt64 so
// they are refused as too large (413), not as malformed.
func parseLength(v []byte) (int64, *Error) {
	if len(v) == 0 {
		return 0, errContentLength
	}
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, errContentLength
		}
		if n > (math.MaxInt64-9)/10 {
			n = math.MaxInt64
			continue
		}
		n = n*10 + int64(c-'0')
	}
	return n, nil
}
