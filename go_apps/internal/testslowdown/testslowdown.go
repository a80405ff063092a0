// Package testslowdown is a test-only knob for calibrating polyperf's A/B
// gate: POLYPERF_TEST_SLOWDOWN_PCT=P, read once at startup (config.Parse),
// makes the net/http server spend P% more CPU per request than it otherwise
// would, by spinning after each request's handler. Unset, it changes nothing.
//
// The gate measures the server's whole CPU per request (kernel, runtime,
// HTTP parsing, handler), of which the handler is a small part; padding by the
// handler's own time would inject far less than P% into what is measured. So
// the pad is P% of the process's own CPU per request so far (without the
// padding), read from getrusage every few hundred requests: the amount is
// calibrated by the process itself, on whatever machine it runs.
package testslowdown

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// Env is the variable that sets the slowdown, in percent.
const Env = "POLYPERF_TEST_SLOWDOWN_PCT"

// refreshEvery is how many requests pass between two reads of the process's
// CPU time: often enough to follow a warm-up, rarely enough to cost nothing.
const refreshEvery = 256

// Parse reads the variable's value: empty means none; anything else must be a
// percentage in [0, 1000] (a calibration run must not silently measure nothing).
func Parse(value string) (float64, error) {
	value = strings.TrimSpace(value)
	if value == "" {
		return 0, nil
	}
	pct, err := strconv.ParseFloat(value, 64)
	if err != nil || math.IsNaN(pct) || pct < 0 || pct > 1000 {
		return 0, fmt.Errorf("$%s=%q: expected a percentage between 0 and 1000", Env, value)
	}
	return pct, nil
}

// Pacer adds fraction x the process's unpadded CPU per request after each
// request. Safe for concurrent use.
type Pacer struct {
	fraction   float64
	requests   atomic.Int64
	paddedNs   atomic.Int64 // time spent spinning so far, taken out of the average
	perRequest atomic.Int64 // unpadded CPU ns per request, as last read
	cpu        func() time.Duration
}

// NewPacer pads by fraction (0.1 for 10%) of the process's CPU per request.
func NewPacer(fraction float64) *Pacer {
	return &Pacer{fraction: fraction, cpu: processCPU}
}

// After is called once per request, after its handler; it returns the time it
// spun.
func (p *Pacer) After() time.Duration {
	if p.fraction <= 0 {
		return 0
	}
	n := p.requests.Add(1)
	if n%refreshEvery == 0 {
		unpadded := int64(p.cpu()) - p.paddedNs.Load()
		p.perRequest.Store(max(unpadded, 0) / n)
	}
	spun := Spin(time.Duration(float64(p.perRequest.Load()) * p.fraction))
	p.paddedNs.Add(int64(spun))
	return spun
}

// Spin busy-waits for d and returns the time it took: CPU work, as a slower
// code path would be, not a sleep.
func Spin(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	start := time.Now()
	for time.Since(start) < d {
	}
	return time.Since(start)
}

func processCPU() time.Duration {
	var usage syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &usage); err != nil {
		return 0
	}
	return time.Duration(usage.Utime.Nano() + usage.Stime.Nano())
}
