// Package schedbench holds the goroutine versions of Tokio's four scheduler
// microbenchmarks (spawn_many, yield_many, ping_pong, chained_spawn); the
// benchmarks in schedbench_test.go time them under `go test -bench`.
package schedbench

import (
	"runtime"
	"sync/atomic"
)

// The shapes' sizes, the same as the Rust benches in rust_apps/sched_bench.
const (
	SpawnManyTasks = 10_000
	YieldTasks     = 200
	YieldsPerTask  = 1_000
	PingPongPairs  = 1_000
	ChainDepth     = 1_000
)

// countdown closes done when the last of n goroutines has called tick.
type countdown struct {
	remaining atomic.Int64
	done      chan struct{}
}

func newCountdown(n int) *countdown {
	c := &countdown{done: make(chan struct{})}
	c.remaining.Store(int64(n))
	return c
}

func (c *countdown) tick() {
	if c.remaining.Add(-1) == 0 {
		close(c.done)
	}
}

// SpawnMany starts tasks goroutines that each count down once, and waits for the last.
func SpawnMany(tasks int) {
	c := newCountdown(tasks)
	for range tasks {
		go c.tick()
	}
	<-c.done
}

// YieldMany starts tasks goroutines that each yield (runtime.Gosched) yields times.
func YieldMany(tasks, yields int) {
	c := newCountdown(tasks)
	for range tasks {
		go func() {
			for range yields {
				runtime.Gosched()
			}
			c.tick()
		}()
	}
	<-c.done
}

// pingPongPair spawns a partner, sends it a ping and waits for its pong. The
// channels have capacity 1, so a send never blocks: Tokio's oneshot semantics.
func pingPongPair(c *countdown) {
	ping := make(chan struct{}, 1)
	pong := make(chan struct{}, 1)
	go func() {
		<-ping
		pong <- struct{}{}
	}()
	ping <- struct{}{}
	<-pong
	c.tick()
}

// PingPong runs pairs ping-pong round trips, spawned from one root goroutine as in Tokio.
func PingPong(pairs int) {
	c := newCountdown(pairs)
	go func() {
		for range pairs {
			go pingPongPair(c)
		}
	}()
	<-c.done
}

func chain(done chan<- struct{}, depth int) {
	if depth == 0 {
		close(done)
		return
	}
	go chain(done, depth-1)
}

// ChainedSpawn runs a chain of depth goroutines, each starting the next.
func ChainedSpawn(depth int) {
	done := make(chan struct{})
	go chain(done, depth)
	<-done
}
