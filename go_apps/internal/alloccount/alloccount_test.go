package alloccount

import (
	"bufio"
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
)

func TestServeIsOffWithoutTheVariable(t *testing.T) {
	stop, err := Serve(context.Background(), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	stop()
}

func TestServeAnswersTheCountOnLoopback(t *testing.T) {
	probe, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(probe.Addr().(*net.TCPAddr).Port)
	_ = probe.Close()
	stop, err := Serve(context.Background(), func(k string) string {
		if k == PortEnv {
			return port
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	read := func() uint64 {
		conn, err := net.Dial("tcp4", "127.0.0.1:"+port)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		line, err := bufio.NewReader(conn).ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.ParseUint(strings.TrimSpace(line), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	a := read()
	sink := make([][]byte, 0, 100)
	for i := 0; i < 100; i++ {
		sink = append(sink, make([]byte, 4096))
	}
	_ = sink
	if b := read(); b < a+100 {
		t.Fatalf("counter went from %d to %d over 100 heap allocations", a, b)
	}
}

func TestExtra(t *testing.T) {
	tests := []struct {
		value string
		want  int
		fails bool
	}{{"", 0, false}, {"1", 1, false}, {"x", 0, true}, {"-1", 0, true}}
	for _, tc := range tests {
		got, err := Extra(func(string) string { return tc.value })
		if got != tc.want || (err != nil) != tc.fails {
			t.Errorf("Extra(%q) = %d, %v", tc.value, got, err)
		}
	}
}
