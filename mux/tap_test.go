package mux

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRedactShowsShapeNotValues(t *testing.T) {
	frame := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"sk-SECRET","n":3,"ok":true,"list":["a","b"]}}}`)
	got := Redact(frame, len(frame))
	assert.Equal(t, `{arguments:{list:[2×string(1)], n:number, ok:bool, text:string(9)}, name:"echo"}`, got)
	assert.NotContains(t, got, "SECRET")

	other := []byte(`{"jsonrpc":"2.0","id":8,"method":"x/y","params":{"name":"sk-SECRET"}}`)
	assert.Equal(t, `{name:string(9)}`, Redact(other, len(other)), "a name is shown only as a tool's or a prompt's")

	answer := []byte(`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"sk-SECRET"}]}}`)
	assert.Equal(t, `{content:[1×{text:string(9), type:string(4)}]}`, Redact(answer, len(answer)))
	assert.Equal(t, "(99 bytes, too large to show)", Redact(answer, 99))
}

// next is the tap's next line, failing the test if none comes within a second.
func next(t *testing.T, tap *Tap) TapEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	ev, err := tap.Next(ctx)
	require.NoError(t, err)
	return ev
}

// TestTapQueueIsBoundedAndCountsLossInPlace: a tap that falls behind keeps
// its first TapQueue lines, and the count of the lines it lost comes after
// them, before the next line it could keep.
func TestTapQueueIsBoundedAndCountsLossInPlace(t *testing.T) {
	ts := NewTaps()
	assert.Nil(t, ts.active(), "no tap: nothing to publish to")
	tap := ts.Attach(TapFilter{Servers: []string{"a"}})
	frame := []byte(`{"jsonrpc":"2.0","method":"notifications/x","params":{"k":"v"}}`)
	for i := range TapQueue + 10 {
		ts.publish(ts.active(), TapEvent{Server: "a", Method: "m" + string(rune('0'+i%10))}, frame)
	}
	ts.publish(ts.active(), TapEvent{Server: "b"}, frame) // not this tap's
	assert.Len(t, tap.ch, TapQueue)
	for range TapQueue - 1 {
		next(t, tap)
	}
	ts.publish(ts.active(), TapEvent{Server: "a", Method: "after"}, frame)
	ev := next(t, tap)
	assert.Equal(t, int64(0), ev.Lost, "the last line kept")
	assert.Equal(t, "{k:string(1)}", ev.Shape)
	assert.Equal(t, len(frame), ev.Bytes)
	assert.Equal(t, int64(10), next(t, tap).Lost, "then the count of the lines lost")
	assert.Equal(t, "after", next(t, tap).Method, "then the next line")

	for range TapQueue + 3 {
		ts.publish(ts.active(), TapEvent{Server: "a"}, frame)
	}
	for range TapQueue {
		next(t, tap)
	}
	assert.Equal(t, int64(3), next(t, tap).Lost, "a tap that drained its queue is told of its loss")
	tap.Close()
	assert.Nil(t, ts.active(), "the last tap gone, messages cost nothing again")
}

func TestTapQueueIsBoundedInBytes(t *testing.T) {
	ts := NewTaps()
	tap := ts.Attach(TapFilter{})
	defer tap.Close()
	big := []byte(`{"p":"` + strings.Repeat("x", tapFrameCap) + `"}`)
	fit := TapQueueBytes / tapFrameCap
	for range fit + 5 {
		ts.publish(ts.active(), TapEvent{Server: "a"}, big)
	}
	assert.Len(t, tap.ch, fit)
	for range fit {
		next(t, tap)
	}
	assert.Equal(t, int64(5), next(t, tap).Lost)
	assert.Zero(t, tap.queued, "every byte counted out")
}

func TestTapFullCutsLargeMessages(t *testing.T) {
	ts := NewTaps()
	tap := ts.Attach(TapFilter{Full: true})
	defer tap.Close()
	big := []byte(`{"p":"` + strings.Repeat("x", tapFrameCap) + `"}`)
	ts.publish(ts.active(), TapEvent{Server: "a"}, big)
	ev := next(t, tap)
	assert.Equal(t, len(big), ev.Bytes)
	assert.LessOrEqual(t, len(ev.Message), tapFrameCap+16, "kept at most the cap")
	assert.True(t, strings.HasSuffix(string(ev.Message), `…"`), "a cut message is shown as a string that says so")
}

// TestNoTapCostsNothing: with no tap attached, and after the last one
// left, the check on the hot path allocates nothing.
func TestNoTapCostsNothing(t *testing.T) {
	ts := NewTaps()
	check := func() {
		if taps := ts.active(); taps != nil {
			ts.publish(taps, TapEvent{}, []byte(`{}`))
		}
	}
	assert.Zero(t, testing.AllocsPerRun(100, check), "never attached")
	ts.Attach(TapFilter{}).Close()
	assert.Zero(t, testing.AllocsPerRun(100, check), "after the last tap left")
	var none *Taps // a hub of no daemon
	assert.Nil(t, none.active())
}

func TestTapEventString(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.Local)
	ms := 12.5
	tests := []struct {
		name string
		ev   TapEvent
		want string
	}{
		{"request", TapEvent{Time: at, Server: "demo", Session: 3, Client: "claude-code", Dir: "up", Kind: "request", Method: "tools/call", ID: json.RawMessage(`"a"`), UpstreamID: json.RawMessage(`12`), Bytes: 90, Shape: `{name:"echo"}`},
			`03:04:05.006 demo #3 (claude-code) -> tools/call id "a" (up 12) 90B {name:"echo"}`},
		{"answer", TapEvent{Time: at, Server: "demo", Session: 3, Dir: "down", Kind: "error", Method: "tools/call", ID: json.RawMessage(`7`), UpstreamID: json.RawMessage(`12`), Bytes: 60, MS: &ms},
			`03:04:05.006 demo #3 <- error to tools/call id 7 (up 12) 60B 12.5ms`},
		{"broadcast", TapEvent{Time: at, Server: "demo", Dir: "down", Kind: "notification", Method: "notifications/tools/list_changed", Bytes: 40},
			`03:04:05.006 demo * <- notifications/tools/list_changed 40B`},
		{"lost", TapEvent{Time: at, Lost: 4}, `03:04:05.006 ... 4 lines lost (the tap fell behind)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.ev.String())
		})
	}
}

// BenchmarkTapPublish: what a message costs the hub's path with no tap
// attached (the atomic load), and with one tap that never reads (its queue
// full: the line is counted lost, the frame not copied).
func BenchmarkTapPublish(b *testing.B) {
	frame := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`)
	ts := NewTaps()
	run := func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if taps := ts.active(); taps != nil {
				ts.publish(taps, TapEvent{Server: "demo", Kind: "request"}, frame)
			}
		}
	}
	b.Run("no-tap", run)
	tap := ts.Attach(TapFilter{})
	defer tap.Close()
	b.Run("stalled-tap", run)
}
