// Package cli is the main shared by the server binaries: flags → config →
// api.App → server.Run, with SIGINT/SIGTERM handling and the one
// "listening on" line the Python harness waits for.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"polyperf/go_apps/internal/alloccount"
	"polyperf/go_apps/internal/api"
	"polyperf/go_apps/internal/config"
)

// Server is what both server packages provide.
type Server interface {
	Run(ctx context.Context, ready func(addr string)) error
}

// NewServer builds a server; gnetserver.New and nethttpserver.New fit once wrapped.
type NewServer func(cfg config.Config, app *api.App, logger *log.Logger) Server

// Main runs a server binary and returns its exit code.
func Main(appName, defaultTable string, newServer NewServer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() { <-ctx.Done(); stop() }() // a second signal kills a stuck shutdown
	return Run(ctx, appName, defaultTable, os.Args[1:], os.Getenv, os.Stderr, newServer)
}

// Run is Main without process globals, for tests: it serves until ctx is done.
// Exit codes: 0 clean stop or --help, 2 bad flags, 1 failure to start or serve.
func Run(ctx context.Context, appName, defaultTable string, args []string, getenv func(string) string,
	stderr io.Writer, newServer NewServer) int {
	cfg, err := config.Parse(appName, defaultTable, args, getenv, stderr)
	if errors.Is(err, config.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, oneLine(err))
		return 2
	}
	logger := log.New(stderr, appName+" ", log.LstdFlags)
	fail := func(err error) int {
		fmt.Fprintf(stderr, "%s: %s\n", appName, oneLine(err))
		return 1
	}
	extra, err := alloccount.Extra(getenv)
	if err != nil {
		return fail(err)
	}
	stopCounter, err := alloccount.Serve(ctx, getenv) // off unless the harness asks for allocation counts
	if err != nil {
		return fail(err)
	}
	defer stopCounter()
	app, closeApp, err := api.Open(ctx, cfg, logger)
	if err != nil {
		return fail(err)
	}
	defer closeApp()
	app.SetExtraAllocs(extra)
	ready := func(addr string) { fmt.Fprintf(stderr, "listening on http://%s\n", addr) }
	if err := newServer(cfg, app, logger).Run(ctx, ready); err != nil {
		return fail(err)
	}
	logger.Printf("stopped")
	return 0
}

// oneLine keeps a start-up failure to the single line the harness reports.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}
