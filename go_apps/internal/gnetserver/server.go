// Package gnetserver serves the devices API on gnet event loops. Requests are
// parsed by httpparse straight from gnet's inbound buffer; database inserts
// run on a goroutine pool (post.go) so no event loop ever blocks.
package gnetserver

import (
	"context"
	"fmt"
	"log"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/panjf2000/gnet/v2"

	"polyperf/go_apps/internal/api"
	"polyperf/go_apps/internal/config"
	"polyperf/go_apps/internal/httpdate"
)

// stopTimeout bounds how long shutdown waits for event loops to finish.
const stopTimeout = 10 * time.Second

// Server is a gnet event handler; one per process.
type Server struct {
	gnet.BuiltinEventEngine
	cfg   config.Config
	app   *api.App
	log   *log.Logger
	dates *httpdate.Cache
	ready func(addr string)

	eng    gnet.Engine
	booted chan struct{} // closed by OnBoot, after which eng is set

	jobs    chan postJob
	workers sync.WaitGroup
	// Prebuilt AsyncWrite callbacks, so a POST allocates no closure.
	resumeKeep, resumeClose gnet.AsyncCallback
}

// New builds a server for cfg; Run starts it.
func New(cfg config.Config, app *api.App, logger *log.Logger) *Server {
	s := &Server{
		cfg:    cfg,
		app:    app,
		log:    logger,
		dates:  httpdate.NewCache(),
		booted: make(chan struct{}),
		jobs:   make(chan postJob, postQueueLen),
	}
	s.resumeKeep = func(c gnet.Conn, err error) error { return s.afterPost(c, err, true) }
	s.resumeClose = func(c gnet.Conn, err error) error { return s.afterPost(c, err, false) }
	return s
}

// Run serves until ctx is done, then stops the event loops and the insert
// workers. ready is called with the bound host:port once listening.
func (s *Server) Run(ctx context.Context, ready func(addr string)) error {
	s.ready = ready
	bg, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.dates.Run(bg)
	s.startWorkers(s.cfg.PoolSize)
	defer s.stopWorkers()

	loops := s.cfg.Workers
	if loops <= 0 {
		loops = runtime.GOMAXPROCS(0)
	}
	done := make(chan struct{})
	go s.stopOnCancel(ctx, done)
	err := gnet.Run(s, "tcp://"+s.cfg.Addr(),
		gnet.WithMulticore(true),
		gnet.WithNumEventLoop(loops),
		gnet.WithTCPNoDelay(gnet.TCPNoDelay),
		// Without SO_REUSEADDR, connections we closed linger in TIME-WAIT and
		// block the next server on this port for a minute (harness restarts).
		gnet.WithReuseAddr(true),
		gnet.WithLogger(gnetLogger{s.log}),
	)
	close(done)
	if err != nil {
		return fmt.Errorf("gnet on %s: %w", s.cfg.Addr(), err)
	}
	return nil
}

func (s *Server) stopOnCancel(ctx context.Context, done <-chan struct{}) {
	select {
	case <-ctx.Done():
	case <-done:
		return
	}
	select {
	case <-s.booted:
	case <-done:
		return
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	if err := s.eng.Stop(stopCtx); err != nil {
		s.log.Printf("stopping gnet: %v", err)
	}
}

// OnBoot runs once the listener is bound, before any connection is served
// (the kernel queues early connections, so announcing here is safe).
func (s *Server) OnBoot(eng gnet.Engine) gnet.Action {
	s.eng = eng
	close(s.booted)
	if s.ready != nil {
		s.ready(s.boundAddr(eng))
	}
	return gnet.None
}

// boundAddr reports the real port, which differs from cfg's when it is 0.
func (s *Server) boundAddr(eng gnet.Engine) string {
	fd, err := eng.Dup()
	if err != nil {
		return s.cfg.Addr()
	}
	defer syscall.Close(fd) //nolint:errcheck
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		return s.cfg.Addr()
	}
	port := s.cfg.Port
	switch a := sa.(type) {
	case *syscall.SockaddrInet4:
		port = a.Port
	case *syscall.SockaddrInet6:
		port = a.Port
	}
	return net.JoinHostPort(s.cfg.Host, strconv.Itoa(port))
}

// gnetLogger routes gnet's logging to our stderr logger (gnet's default
// writes to stdout) and drops its start-up chatter.
type gnetLogger struct{ l *log.Logger }

func (gnetLogger) Debugf(string, ...any)            {}
func (gnetLogger) Infof(string, ...any)             {}
func (g gnetLogger) Warnf(format string, a ...any)  { g.l.Printf("gnet: "+format, a...) }
func (g gnetLogger) Errorf(format string, a ...any) { g.l.Printf("gnet: "+format, a...) }
func (g gnetLogger) Fatalf(format string, a ...any) {
	g.l.Printf("gnet fatal: "+format, a...)
	os.Exit(1)
}
