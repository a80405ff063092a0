package schedbench

import "testing"

// TestShapesFinish runs each shape once at a small size: they must return
// (a lost wake-up would hang until the test timeout).
func TestShapesFinish(t *testing.T) {
	SpawnMany(100)
	YieldMany(4, 10)
	PingPong(50)
	ChainedSpawn(50)
	SpawnMany(1) // the edge where the only goroutine is also the last
}

func BenchmarkSpawnMany(b *testing.B) {
	for b.Loop() {
		SpawnMany(SpawnManyTasks)
	}
}

func BenchmarkYieldMany(b *testing.B) {
	for b.Loop() {
		YieldMany(YieldTasks, YieldsPerTask)
	}
}

func BenchmarkPingPong(b *testing.B) {
	for b.Loop() {
		PingPong(PingPongPairs)
	}
}

func BenchmarkChainedSpawn(b *testing.B) {
	for b.Loop() {
		ChainedSpawn(ChainDepth)
	}
}
