// Package nethttpserver serves the devices API with the standard library's
// net/http, the baseline the gnet server is measured against. Routing and
// bodies come from package api, so the two differ only in transport.
package nethttpserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"time"

	"polyperf/go_apps/internal/api"
	"polyperf/go_apps/internal/config"
	"polyperf/go_apps/internal/testslowdown"
)

const (
	shutdownTimeout = 10 * time.Second
	// net/http reads up to MaxHeaderBytes+4096 before answering 431, so this
	// gives the same 8 KiB head limit as the gnet server.
	maxHeaderBytes = 8<<10 - 4096
)

// Server is the net/http devices server.
type Server struct {
	cfg config.Config
	app *api.App
	log *log.Logger
}

// New builds a server for cfg; Run starts it.
func New(cfg config.Config, app *api.App, logger *log.Logger) *Server {
	return &Server{cfg: cfg, app: app, log: logger}
}

// Run serves until ctx is done, then shuts down gracefully. ready is called
// with the bound host:port once listening. --workers > 0 sets GOMAXPROCS.
func (s *Server) Run(ctx context.Context, ready func(addr string)) error {
	if s.cfg.Workers > 0 {
		runtime.GOMAXPROCS(s.cfg.Workers)
	}
	ln, err := net.Listen("tcp", s.cfg.Addr())
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.cfg.Addr(), err)
	}
	srv := &http.Server{
		Handler:        s.Handler(),
		MaxHeaderBytes: maxHeaderBytes,
		ErrorLog:       s.log,
	}
	if ready != nil {
		ready(net.JoinHostPort(s.cfg.Host, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)))
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve on %s: %w", s.cfg.Addr(), err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve on %s: %w", s.cfg.Addr(), err)
	}
	return nil
}

// Handler routes with api.Route rather than http.ServeMux so that 404 and
// 405 carry JSON bodies (the mux answers them in plain text).
func (s *Server) Handler() http.Handler {
	h := s.handler()
	if s.cfg.SlowdownPct <= 0 {
		return h
	}
	pacer := testslowdown.NewPacer(s.cfg.SlowdownPct / 100)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		pacer.After() // before net/http flushes the response
	})
}

func (s *Server) handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ep, allow := api.Route(r.Method, r.URL.Path)
		if ep != api.CreateDevice {
			s.write(w, r, s.app.Static(ep, allow))
			return
		}
		body, resp := readBody(w, r)
		if resp == nil {
			d, final := s.app.PrepareCreate(body)
			if final == nil {
				created := s.app.Create(r.Context(), d)
				final = &created
			}
			resp = final
		}
		s.write(w, r, *resp)
	})
}

// readBody reads at most api.MaxBodyBytes. A declared length over the limit
// is refused before reading anything.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, *api.Response) {
	if r.ContentLength > api.MaxBodyBytes {
		tooLarge := api.TooLarge()
		w.Header().Set("Connection", "close") // the unread body makes the connection unusable
		return nil, &tooLarge
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, api.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			tooLarge := api.TooLarge()
			return nil, &tooLarge
		}
		bad := api.Error(http.StatusBadRequest, "could not read request body")
		return nil, &bad
	}
	return body, nil
}

func (s *Server) write(w http.ResponseWriter, req *http.Request, r api.Response) {
	h := w.Header()
	if req.Close { // net/http closes anyway; say so, as the gnet server does
		h.Set("Connection", "close")
	}
	h.Set("Server", s.cfg.AppName)
	h.Set("Content-Type", api.ContentType)
	h.Set("Content-Length", strconv.Itoa(len(r.Body)))
	if r.Allow != "" {
		h.Set("Allow", r.Allow)
	}
	w.WriteHeader(r.Status)
	_, _ = w.Write(r.Body) // net/http drops the body for HEAD itself
}
