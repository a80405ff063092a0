package httpdate

import (
	"context"
	"net/http"
	"testing"
	"time"
)

func TestFormatMatchesNetHTTP(t *testing.T) {
	if TimeFormat != http.TimeFormat {
		t.Fatalf("TimeFormat %q differs from net/http's %q", TimeFormat, http.TimeFormat)
	}
	ts := time.Date(2024, 2, 29, 23, 5, 9, 0, time.FixedZone("X", 3600))
	if got, want := Format(ts), "Thu, 29 Feb 2024 22:05:09 GMT"; got != want {
		t.Fatalf("Format = %q, want %q", got, want)
	}
}

func TestUntilNextSecond(t *testing.T) {
	for _, tc := range []struct {
		frac time.Duration
		want time.Duration
	}{{0, time.Second + time.Millisecond}, {250 * time.Millisecond, 751 * time.Millisecond}, {999 * time.Millisecond, 2 * time.Millisecond}} {
		now := time.Unix(100, 0).Add(tc.frac)
		if got := untilNextSecond(now); got != tc.want {
			t.Errorf("untilNextSecond(+%v) = %v, want %v", tc.frac, got, tc.want)
		}
	}
}

func TestCacheChanges(t *testing.T) {
	c := NewCache()
	first := c.Get()
	if _, err := time.Parse(TimeFormat, first); err != nil {
		t.Fatalf("Get() = %q: %v", first, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.Run(ctx)
	deadline := time.Now().Add(3 * time.Second)
	for c.Get() == first {
		if time.Now().After(deadline) {
			t.Fatal("Date did not change within 3s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
