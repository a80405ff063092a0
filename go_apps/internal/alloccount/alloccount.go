// Package alloccount serves the Go runtime's own allocation counter to the
// harness: off unless POLYPERF_ALLOC_COUNTER_PORT names a port, and then bound
// to 127.0.0.1 only. Each connection gets runtime.MemStats.Mallocs (heap
// objects allocated so far) as one decimal line, read before anything is
// written, so the reading itself adds nothing to the count it reports.
package alloccount

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strconv"
)

// PortEnv turns the endpoint on; ExtraEnv adds that many heap allocations to
// every GET /api/devices (for the test that proves a CI gate sees one more).
const (
	PortEnv  = "POLYPERF_ALLOC_COUNTER_PORT"
	ExtraEnv = "POLYPERF_TEST_EXTRA_ALLOCS"
)

// Mallocs is the runtime's count of heap objects allocated so far. ReadMemStats
// stops the world, which flushes every P's cached counts: the number is exact.
func Mallocs() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.Mallocs
}

// Serve starts the endpoint when getenv(PortEnv) is set and returns a stop
// function (never nil); without the variable it does nothing.
func Serve(ctx context.Context, getenv func(string) string) (stop func(), err error) {
	value := getenv(PortEnv)
	if value == "" {
		return func() {}, nil
	}
	port, err := strconv.ParseUint(value, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("%s=%q is not a port: %w", PortEnv, value, err)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp4", net.JoinHostPort("127.0.0.1", strconv.FormatUint(port, 10)))
	if err != nil {
		return nil, fmt.Errorf("allocation counter: %w", err)
	}
	go func() {
		for {
			conn, err := ln.Accept()
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if err != nil {
				continue
			}
			n := Mallocs()
			_, _ = fmt.Fprintf(conn, "%d\n", n)
			_ = conn.Close()
		}
	}()
	return func() { _ = ln.Close() }, nil
}

// Extra reads getenv(ExtraEnv): how many allocations to add per request (0
// unless set; a bad value is an error naming the variable).
func Extra(getenv func(string) string) (int, error) {
	value := getenv(ExtraEnv)
	if value == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(value)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s=%q is not a count", ExtraEnv, value)
	}
	return n, nil
}
