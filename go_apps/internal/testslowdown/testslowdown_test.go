package testslowdown

import (
	"testing"
	"time"
)

// A table-driven test like store's TestValidIdentifier: the shape is Go's idiom, the cases are this package's.
func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
		ok   bool
	}{
		{"", 0, true},
		{"  ", 0, true},
		{"10", 10, true},
		{"2.5", 2.5, true},
		{"0", 0, true},
		{"1000", 1000, true},
		{"abc", 0, false},
		{"-1", 0, false},
		{"NaN", 0, false},
		{"1001", 0, false},
		{"Inf", 0, false},
	} {
		got, err := Parse(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("Parse(%q) = %v, %v; want %v, ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestSpinTakesAtLeastItsTime(t *testing.T) {
	if got := Spin(0); got != 0 {
		t.Fatalf("Spin(0) = %v", got)
	}
	if got := Spin(2 * time.Millisecond); got < 2*time.Millisecond {
		t.Fatalf("Spin(2ms) = %v", got)
	}
}

// TestPacerPadsAShareOfTheUnpaddedCostPerRequest: with a fake clock of 100 µs
// of CPU per request plus whatever was spun, a 10% pacer spins 10 µs per
// request once it has read the clock, and its own spinning does not feed back.
func TestPacerPadsAShareOfTheUnpaddedCostPerRequest(t *testing.T) {
	p := NewPacer(0.10)
	var requests int64
	p.cpu = func() time.Duration {
		return time.Duration(requests)*100*time.Microsecond + time.Duration(p.paddedNs.Load())
	}
	var last time.Duration
	for i := 0; i < 3*refreshEvery; i++ {
		requests++
		last = p.After()
	}
	if last < 10*time.Microsecond || last > 5*time.Millisecond {
		t.Fatalf("spun %v after %d requests, want about 10µs", last, requests)
	}
	if got := p.perRequest.Load(); got != int64(100*time.Microsecond) {
		t.Fatalf("unpadded CPU per request %v, want 100µs", time.Duration(got))
	}
	if NewPacer(0).After() != 0 {
		t.Fatal("no fraction, no padding")
	}
}
