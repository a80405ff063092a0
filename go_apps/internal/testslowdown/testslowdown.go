// Package testslowdown is a test-only knob for calibrating polyperf's A/B
// gate: POLYPERF_TEST_SLOWDOWN_PCT=P, read once at startup (config.Parse),
// makes the net/http server's handler spin for P% of its own time after each
// request, so a known slowdown can be injected into one binary. Unset, it
// changes nothing.
package testslowdown

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Env is the variable that sets the slowdown, in percent.
const Env = "POLYPERF_TEST_SLOWDOWN_PCT"

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

// Pad spins for fraction x elapsed and returns the time it added: CPU work,
// as a slower code path would be, not a sleep.
func Pad(elapsed time.Duration, fraction float64) time.Duration {
	if fraction <= 0 {
		return 0
	}
	extra := time.Duration(float64(elapsed) * fraction)
	start := time.Now()
	for time.Since(start) < extra { // spin: the added time is work on this core
	}
	return time.Since(start)
}
