package httpparse

import "bytes"

type state uint8

const (
	stLine state = iota
	stHeaders
	stBody
)

// Parser holds one connection's progress through the current request.
// After Parse returns an error its state is undefined: close the connection.
type Parser struct {
	lim Limits
	st  state
	// pos is where the first unparsed line starts; scan is how far past pos
	// a '\n' was already searched for, so 1-byte reads cost O(1) each.
	pos, scan int
	req       Request
	headers   int
	hosts     int
	length    int64
	hasLength bool
	te        bool
	connClose bool
	connKeep  bool
	expect100 bool
	sent100   bool
}

// NewParser returns a parser enforcing lim.
func NewParser(lim Limits) *Parser { return &Parser{lim: lim} }

// Reset forgets the current request; limits are kept.
func (p *Parser) Reset() { *p = Parser{lim: p.lim} }

// Parse continues parsing buf, which must hold the current request from its
// first byte and extend whatever buf the previous call saw. It returns:
//   - n > 0: a complete request that used buf[:n]; the parser is reset for
//     the next one, which starts at buf[n].
//   - n == 0, err == nil: more bytes are needed; keep buf and call again.
//   - err (an *Error): refuse with err.Status and close the connection.
func (p *Parser) Parse(buf []byte) (req Request, n int, err error) {
	for p.st != stBody {
		line, ok, e := p.nextLine(buf)
		if e == nil && ok {
			if p.st == stLine {
				e = p.requestLine(line)
			} else {
				e = p.header(line)
			}
		}
		if e != nil {
			return Request{}, 0, e
		}
		if !ok {
			return Request{}, 0, nil
		}
	}
	end := p.pos + int(p.length) // length <= MaxBodyBytes here, no overflow
	if len(buf) < end {
		return Request{}, 0, nil
	}
	req = p.req
	req.Body = buf[p.pos:end:end]
	p.Reset()
	return req, end, nil
}

// WantsContinue reports, once per request, that the head asked for
// "Expect: 100-continue" and the body has not arrived: the caller should send
// "HTTP/1.1 100 Continue" so the client stops waiting.
func (p *Parser) WantsContinue() bool {
	if p.st != stBody || !p.expect100 || p.sent100 || p.length == 0 || p.req.Minor == 0 {
		return false
	}
	p.sent100 = true
	return true
}

// nextLine returns the next complete line without its CRLF (a bare LF is
// accepted as the terminator, as RFC 9112 §2.2 allows).
func (p *Parser) nextLine(buf []byte) (line []byte, ok bool, err *Error) {
	i := bytes.IndexByte(buf[p.scan:], '\n')
	if i < 0 {
		p.scan = len(buf)
		return nil, false, p.checkHeadSize(len(buf))
	}
	end := p.scan + i
	if err := p.checkHeadSize(end + 1); err != nil {
		return nil, false, err
	}
	line = buf[p.pos:end]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	if bytes.IndexByte(line, '\r') >= 0 {
		return nil, false, errBareCR
	}
	p.pos, p.scan = end+1, end+1
	return line, true, nil
}

func (p *Parser) checkHeadSize(n int) *Error {
	if n <= p.lim.MaxHeadBytes {
		return nil
	}
	if p.st == stLine {
		return errLineTooLong
	}
	return errHeadTooLarge
}

// requestLine parses "METHOD SP target SP HTTP/1.x".
func (p *Parser) requestLine(line []byte) *Error {
	if len(line) == 0 {
		return nil // RFC 9112 §2.2: ignore empty lines before the request line
	}
	sp1 := bytes.IndexByte(line, ' ')
	if sp1 < 0 {
		return errRequestLine
	}
	method, rest := line[:sp1], line[sp1+1:]
	sp2 := bytes.IndexByte(rest, ' ')
	if sp2 < 0 {
		return errRequestLine
	}
	target, version := rest[:sp2], rest[sp2+1:]
	if !isToken(method) {
		return errMethod
	}
	minor, err := parseVersion(version)
	if err != nil {
		return err
	}
	path, ok := targetPath(target)
	if !ok {
		return errTarget
	}
	if m, known := internedMethods[string(method)]; known { // no allocation for the lookup
		p.req.Method = m
	} else {
		p.req.Method = string(method)
	}
	p.req.Target = string(target)
	p.req.Path = p.req.Target[path[0]:path[1]]
	p.req.Minor = minor
	p.st = stHeaders
	return nil
}

// header parses one field line, or finishes the head on the empty line.
func (p *Parser) header(line []byte) *Error {
	if len(line) == 0 {
		return p.finishHead()
	}
	if line[0] == ' ' || line[0] == '\t' {
		return errObsFold
	}
	colon := bytes.IndexByte(line, ':')
	if colon <= 0 || !isToken(line[:colon]) { // also rejects space before the colon
		return errHeaderName
	}
	if p.headers++; p.headers > p.lim.MaxHeaders {
		return errTooManyHeaders
	}
	name, value := line[:colon], bytes.Trim(line[colon+1:], " \t")
	for _, c := range value {
		if (c < ' ' && c != '\t') || c == 0x7f {
			return errHeaderValue
		}
	}
	switch {
	case lowerEq(name, "content-length"):
		n, err := parseLength(value)
		if err != nil {
			return err
		}
		if p.hasLength && n != p.length {
			return errConflictLength
		}
		p.length, p.hasLength = n, true
	case lowerEq(name, "transfer-encoding"):
		p.te = true
	case lowerEq(name, "connection"):
		p.connection(value)
	case lowerEq(name, "host"):
		if p.hosts++; p.hosts > 1 {
			return errDuplicateHost
		}
	case lowerEq(name, "expect"):
		p.expect100 = lowerEq(value, "100-continue")
	}
	return nil
}

func (p *Parser) connection(v []byte) {
	for len(v) > 0 {
		var tok []byte
		if i := bytes.IndexByte(v, ','); i >= 0 {
			tok, v = v[:i], v[i+1:]
		} else {
			tok, v = v, nil
		}
		tok = bytes.Trim(tok, " \t")
		switch {
		case lowerEq(tok, "close"):
			p.connClose = true
		case lowerEq(tok, "keep-alive"):
			p.connKeep = true
		}
	}
}

func (p *Parser) finishHead() *Error {
	switch {
	case p.req.Minor >= 1 && p.hosts == 0:
		return errMissingHost // RFC 9112 §3.2, as net/http does
	case p.te && p.hasLength:
		return errLengthAndTE // a request-smuggling shape
	case p.te:
		return errTransferCoding
	case p.length > p.lim.MaxBodyBytes:
		return errBodyTooLarge
	}
	if p.req.Minor >= 1 {
		p.req.KeepAlive = !p.connClose
	} else {
		p.req.KeepAlive = p.connKeep && !p.connClose
	}
	p.st = stBody
	return nil
}
