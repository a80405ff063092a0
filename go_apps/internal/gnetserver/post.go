package gnetserver

import (
	"context"
	"net/http"

	"github.com/panjf2000/gnet/v2"

	"polyperf/go_apps/internal/api"
	"polyperf/go_apps/internal/devices"
)

// postQueueLen bounds POSTs waiting for a worker. A connection has at most
// one in flight, so this is only reached with thousands of connections.
const postQueueLen = 8192

var busyResp = api.Error(http.StatusServiceUnavailable, "server busy")

// postJob is one INSERT to run off the event loop.
type postJob struct {
	c     gnet.Conn
	dev   devices.New
	frame frame
}

// startWorkers starts n insert workers: as many as pool connections, so a
// worker never waits for a connection another worker of ours holds.
func (s *Server) startWorkers(n int) {
	for range n {
		s.workers.Add(1)
		go func() {
			defer s.workers.Done()
			for j := range s.jobs {
				s.runPost(j)
			}
		}()
	}
}

// stopWorkers lets queued inserts finish; called after the event loops stop.
func (s *Server) stopWorkers() {
	close(s.jobs)
	s.workers.Wait()
}

// submit queues j without blocking the event loop; false means the queue is full.
func (s *Server) submit(j postJob) bool {
	select {
	case s.jobs <- j:
		return true
	default:
		return false
	}
}

func (s *Server) runPost(j postJob) {
	resp := s.app.Create(context.Background(), j.dev)
	out := s.appendResponse(nil, s.dates.Get(), resp, j.frame)
	cb := s.resumeKeep
	if !j.frame.keepAlive {
		cb = s.resumeClose
	}
	// AsyncWrite runs on the connection's event loop, after anything serve
	// already wrote, so pipelined answers stay in order. An error means the
	// connection or the engine is gone: nothing to answer.
	_ = j.c.AsyncWrite(out, cb)
}

// afterPost runs on the event loop once a POST's answer is written: it
// releases the connection and serves requests that arrived meanwhile.
func (s *Server) afterPost(c gnet.Conn, err error, keepAlive bool) error {
	if err != nil {
		return nil
	}
	st, ok := c.Context().(*connState)
	if !ok {
		return nil
	}
	st.busy = false
	if !keepAlive {
		return c.Close()
	}
	if c.InboundBuffered() > 0 {
		return c.Wake(nil)
	}
	return nil
}
