package idmap_test

import (
	"encoding/json"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpmux/mcpmux/idmap"
)

// busy fills a table with n requests in flight from other sessions, so the
// benchmarks measure the maps at a realistic size rather than empty.
func busy(n int) *idmap.Table {
	tab := new(idmap.Table)
	for i := range n {
		tab.Add(idmap.Route{Session: uint64(1000 + i%50), ID: json.RawMessage(strconv.Itoa(i))})
	}
	return tab
}

// ids are the ids the benchmarks send: a client's ids are small integers
// that it reuses once answered.
var ids = func() []json.RawMessage {
	out := make([]json.RawMessage, 256)
	for i := range out {
		out[i] = json.RawMessage(strconv.Itoa(i))
	}
	return out
}()

func BenchmarkAddTake(b *testing.B) {
	tab := busy(1000)
	now := time.Now()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		up, err := tab.Add(idmap.Route{Session: 1, ID: ids[i%len(ids)], Method: "tools/call", Started: now})
		if err != nil {
			b.Fatal(err)
		}
		if _, ok := tab.Take(up); !ok {
			b.Fatal("Take", up)
		}
		i++
	}
}

func BenchmarkAddTakeParallel(b *testing.B) {
	tab := busy(1000)
	now := time.Now()
	var sessions atomic.Uint64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		sess := sessions.Add(1) // one session per goroutine: their ids may repeat
		i := 0
		for pb.Next() {
			up, err := tab.Add(idmap.Route{Session: sess, ID: ids[i%len(ids)], Method: "tools/call", Started: now})
			if err != nil {
				b.Error(err)
				return
			}
			if _, ok := tab.Take(up); !ok {
				b.Error("Take", up)
				return
			}
			i++
		}
	})
}

func BenchmarkCancel(b *testing.B) {
	tab := busy(1000)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		id := ids[i%len(ids)]
		if _, err := tab.Add(idmap.Route{Session: 1, ID: id}); err != nil {
			b.Fatal(err)
		}
		if _, _, ok := tab.Cancel(1, id); !ok {
			b.Fatal("Cancel", string(id))
		}
		i++
	}
}
