package testslowdown

import (
	"testing"
	"time"
)

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

func TestPadAddsAtLeastItsShare(t *testing.T) {
	if got := Pad(10*time.Millisecond, 0); got != 0 {
		t.Fatalf("no fraction, no padding: got %v", got)
	}
	if got := Pad(10*time.Millisecond, 0.5); got < 5*time.Millisecond {
		t.Fatalf("Pad(10ms, 0.5) = %v, want >= 5ms", got)
	}
}
