package gnetserver

import (
	"errors"
	"net/http"
	"syscall"
	"time"

	"github.com/panjf2000/gnet/v2"

	"polyperf/go_apps/internal/api"
	"polyperf/go_apps/internal/httpparse"
)

// Per-connection bounds. gnet keeps reading while we hold requests, so these
// cap the memory one client can pin.
const (
	maxHeldBytes = 1 << 20 // input queued behind an in-flight POST
	maxOutbound  = 4 << 20 // answers the client is not reading
	maxDrain     = 1 << 20 // input swallowed after a fatal error, before closing
	lingerTime   = 2 * time.Second
)

// connState is the per-connection state kept in gnet's conn context. Unparsed
// bytes stay in gnet's inbound buffer; only complete requests are discarded.
type connState struct {
	parser   *httpparse.Parser
	out      []byte // answers batched for one write
	busy     bool   // a POST is in flight; later requests wait in the buffer
	draining bool   // a fatal error was answered; reading until the client leaves
	drained  int
}

// OnOpen attaches fresh state to a new connection.
func (s *Server) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	c.SetContext(&connState{parser: httpparse.NewParser(httpparse.DefaultLimits)})
	return nil, gnet.None
}

// OnTraffic runs on new input and on Wake (after a POST completes).
func (s *Server) OnTraffic(c gnet.Conn) gnet.Action {
	st, ok := c.Context().(*connState)
	if !ok {
		return gnet.Close
	}
	switch {
	case st.draining:
		n, _ := c.Discard(-1)
		if st.drained += n; st.drained > maxDrain {
			return gnet.Close
		}
		return gnet.None
	case st.busy:
		if c.InboundBuffered() > maxHeldBytes {
			return gnet.Close
		}
		return gnet.None
	}
	return s.serve(c, st)
}

// outcome is what serve does with the connection after writing its answers.
type outcome uint8

const (
	keepOpen outcome = iota
	closeConn
	lingerClose // fatal request error: half-close, drain, then close
)

// serve answers every complete request buffered on c, in order, with one
// write. It stops early at a POST that needs the database, at a request
// asking to close, or at a malformed request.
func (s *Server) serve(c gnet.Conn, st *connState) gnet.Action {
	buf, _ := c.Peek(-1) // peek once: bodies alias buf until the Discard below
	out, date := st.out[:0], s.dates.Get()
	used, next := 0, keepOpen
	for used < len(buf) {
		req, n, err := st.parser.Parse(buf[used:])
		if err != nil {
			var perr *httpparse.Error
			errors.As(err, &perr)
			resp := api.Error(perr.Status, perr.Reason)
			if perr.Status == http.StatusRequestEntityTooLarge {
				resp = api.TooLarge() // the same words as net/http's side
			}
			out = s.appendResponse(out, date, resp, frame{})
			used, next = len(buf), lingerClose
			break
		}
		if n == 0 {
			if st.parser.WantsContinue() {
				out = append(out, "HTTP/1.1 100 Continue\r\n\r\n"...)
			}
			break
		}
		used += n
		f := frame{keepAlive: req.KeepAlive, http10: req.Minor == 0, head: req.Method == http.MethodHead}
		ep, allow := api.Route(req.Method, req.Path)
		resp := s.app.Static(ep, allow)
		if ep == api.CreateDevice {
			d, final := s.app.PrepareCreate(req.Body)
			if final == nil && s.submit(postJob{c: c, dev: d, frame: f}) {
				st.busy = true
				break
			}
			if final == nil {
				final = &busyResp
			}
			resp = *final
		}
		out = s.appendResponse(out, date, resp, f)
		if !f.keepAlive {
			used, next = len(buf), closeConn // nothing after "close" is read
			break
		}
	}
	if used > 0 { // careful: gnet's Discard(0) discards everything
		_, _ = c.Discard(used)
	}
	if len(out) > 0 {
		_, _ = c.Write(out)
	}
	st.out = out[:0]
	if cap(st.out) > 64<<10 { // do not pin a huge pipelining batch's buffer
		st.out = nil
	}
	switch {
	case next == closeConn:
		return gnet.Close
	case next == lingerClose:
		return s.linger(c, st)
	case c.OutboundBuffered() > maxOutbound:
		return gnet.Close
	}
	return gnet.None
}

// linger closes after a fatal error without losing the error answer: closing
// with unread input makes the kernel send RST, which can destroy the answer
// before the client reads it (e.g. a client still uploading a 10 GB body).
// So shut down our side, swallow input for a while, then close.
func (s *Server) linger(c gnet.Conn, st *connState) gnet.Action {
	if c.OutboundBuffered() > 0 { // the answer is not on the wire yet; let gnet flush and close
		return gnet.Close
	}
	if err := syscall.Shutdown(c.Fd(), syscall.SHUT_WR); err != nil {
		return gnet.Close
	}
	st.draining = true
	time.AfterFunc(lingerTime, func() { _ = c.Close() }) // a no-op if already closed
	return gnet.None
}
