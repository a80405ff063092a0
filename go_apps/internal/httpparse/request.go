// Package httpparse is an incremental HTTP/1.1 request parser for the gnet
// server, which gets bytes in whatever pieces the network delivers. It keeps
// its progress between calls so a request split over many reads is scanned
// once, and reports how many bytes a complete request used so pipelined
// requests can follow in the same buffer. It never allocates for the body.
package httpparse

import "net/http"

// Limits bound what one request may make the server hold.
type Limits struct {
	MaxHeadBytes int   // request line + headers + blank line
	MaxHeaders   int   // header fields
	MaxBodyBytes int64 // Content-Length
}

// DefaultLimits: 8 KiB of head as in most servers; 1 KiB bodies per the contract.
var DefaultLimits = Limits{MaxHeadBytes: 8 << 10, MaxHeaders: 64, MaxBodyBytes: 1 << 10}

// Request is a parsed request. Body aliases the buffer given to Parse and is
// valid only until that buffer is consumed.
type Request struct {
	Method    string
	Target    string // as sent: origin-form ("/a?b") or absolute-form
	Path      string // Target's path, without query; "" for asterisk-form
	Minor     int    // HTTP/1.Minor
	KeepAlive bool   // after version defaults and the Connection header
	Body      []byte
}

// Error is a request the server must refuse with Status and then close the
// connection: after a framing error the next request's start is unknown.
type Error struct {
	Status int
	Reason string
}

func (e *Error) Error() string { return e.Reason }

func errBad(reason string) *Error { return &Error{http.StatusBadRequest, reason} }

// Fixed errors, allocated once: a flood of bad requests should not allocate.
var (
	errLineTooLong    = &Error{http.StatusRequestURITooLong, "request line too long"}
	errHeadTooLarge   = &Error{http.StatusRequestHeaderFieldsTooLarge, "request headers too large"}
	errTooManyHeaders = &Error{http.StatusRequestHeaderFieldsTooLarge, "too many request headers"}
	errBodyTooLarge   = &Error{http.StatusRequestEntityTooLarge, "request body too large"}
	errVersion        = &Error{http.StatusHTTPVersionNotSupported, "HTTP version not supported"}
	errTransferCoding = &Error{http.StatusNotImplemented, "Transfer-Encoding not supported, send Content-Length"}
	// One named error per rejection: the list reads as the parser's contract (each is matched by tests).
	errRequestLine    = errBad("malformed request line")
	errMethod         = errBad("malformed method")
	errTarget         = errBad("malformed request target")
	errBareCR         = errBad("bare CR in request head")
	errObsFold        = errBad("obsolete header line folding")
	errHeaderName     = errBad("malformed header name")
	errHeaderValue    = errBad("invalid character in header value")
	errContentLength  = errBad("malformed Content-Length")
	errConflictLength = errBad("conflicting Content-Length headers")
	errLengthAndTE    = errBad("both Content-Length and Transfer-Encoding")
	errMissingHost    = errBad("missing Host header")
	errDuplicateHost  = errBad("duplicate Host header")
)
