package cli

import (
	"bytes"
	"context"
	"errors"
	"log"
	"strings"
	"testing"

	"polyperf/go_apps/internal/api"
	"polyperf/go_apps/internal/config"
)

// fakeServer announces an address, then serves until ctx is done or fails.
type fakeServer struct{ err error }

func (f fakeServer) Run(ctx context.Context, ready func(string)) error {
	if f.err != nil {
		return f.err
	}
	ready("127.0.0.1:1234")
	<-ctx.Done()
	return nil
}

func TestRun(t *testing.T) {
	noEnv := func(string) string { return "" }
	tests := []struct {
		name      string
		args      []string
		serverErr error
		code      int
		stderr    string // a line that must appear
	}{
		{name: "serves until cancelled", code: 0, stderr: "listening on http://127.0.0.1:1234\n"},
		{name: "help", args: []string{"--help"}, code: 0, stderr: "-database-url"},
		{name: "bad flag", args: []string{"--table", "no good"}, code: 2, stderr: "is not an identifier"},
		{name: "server fails", serverErr: errors.New("listen on 127.0.0.1:80: permission\ndenied"), code: 1,
			stderr: "app: listen on 127.0.0.1:80: permission denied\n"},
		{name: "database unreachable", args: []string{"--database-url", "postgres://u@127.0.0.1:1/db?connect_timeout=2"}, code: 1,
			stderr: "app: connect to database 127.0.0.1:1:"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			var stderr bytes.Buffer
			newServer := func(config.Config, *api.App, *log.Logger) Server {
				cancel() // stop right after start-up
				return fakeServer{tc.serverErr}
			}
			code := Run(ctx, "app", "app_device", tc.args, noEnv, &stderr, newServer)
			cancel()
			if code != tc.code || !strings.Contains(stderr.String(), tc.stderr) {
				t.Fatalf("code %d, stderr:\n%s\nwant code %d and %q", code, stderr.String(), tc.code, tc.stderr)
			}
			if tc.code == 1 && countPrefixed(stderr.String(), "app: ") != 1 {
				t.Errorf("want exactly one failure line:\n%s", stderr.String())
			}
		})
	}
}

func countPrefixed(text, prefix string) int {
	n := 0
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, prefix) {
			n++
		}
	}
	return n
}
