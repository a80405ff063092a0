// Package httpdate keeps the current HTTP Date header value, formatted once a
// second instead of per response (formatting costs more than the rest of a
// small gnet response).
package httpdate

import (
	"context"
	"sync/atomic"
	"time"
)

// TimeFormat is IMF-fixdate (RFC 9110 §5.6.7), the same layout as net/http's.
const TimeFormat = "Mon, 02 Jan 2006 15:04:05 GMT"

// Format renders t as IMF-fixdate.
func Format(t time.Time) string { return t.UTC().Format(TimeFormat) }

// Cache holds the formatted current time; safe for concurrent use.
type Cache struct{ v atomic.Pointer[string] }

// NewCache returns a cache already holding the current time.
func NewCache() *Cache {
	c := &Cache{}
	c.set(time.Now())
	return c
}

func (c *Cache) set(t time.Time) {
	s := Format(t)
	c.v.Store(&s)
}

// Get returns the Date value, at most about a second old.
func (c *Cache) Get() string { return *c.v.Load() }

// Run refreshes the cache just after each wall-clock second ticks over, until
// ctx is done. Waking at the boundary (not every 1s from an arbitrary start)
// keeps the header within a few milliseconds of the true second.
func (c *Cache) Run(ctx context.Context) {
	timer := time.NewTimer(untilNextSecond(time.Now()))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-timer.C:
			c.set(now)
			timer.Reset(untilNextSecond(time.Now()))
		}
	}
}

func untilNextSecond(now time.Time) time.Duration {
	return now.Truncate(time.Second).Add(time.Second).Sub(now) + time.Millisecond
}
