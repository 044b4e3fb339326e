package mux

import (
	"context"
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

	answer := []byte(`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"sk-SECRET"}]}}`)
	assert.Equal(t, `{content:[1×{text:string(9), type:string(4)}]}`, Redact(answer, len(answer)))
	assert.Equal(t, "(99 bytes, too large to show)", Redact(answer, 99))
}

func TestTapQueueIsBoundedAndCountsLoss(t *testing.T) {
	ts := NewTaps()
	assert.Nil(t, ts.active(), "no tap: nothing to publish to")
	tap := ts.Attach(TapFilter{Servers: []string{"a"}})
	frame := []byte(`{"jsonrpc":"2.0","method":"notifications/x","params":{"k":"v"}}`)
	for range TapQueue + 10 {
		ts.publish(ts.active(), TapEvent{Server: "a"}, frame)
	}
	ts.publish(ts.active(), TapEvent{Server: "b"}, frame) // not this tap's
	assert.Len(t, tap.ch, TapQueue)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	ev, err := tap.Next(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(10), ev.Lost)
	ev, err = tap.Next(ctx)
	require.NoError(t, err)
	assert.Equal(t, "{k:string(1)}", ev.Shape)
	assert.Equal(t, len(frame), ev.Bytes)
	tap.Close()
	assert.Empty(t, ts.active())
}

func TestTapFullCutsLargeMessages(t *testing.T) {
	ts := NewTaps()
	tap := ts.Attach(TapFilter{Full: true})
	defer tap.Close()
	big := []byte(`{"p":"` + strings.Repeat("x", tapFrameCap) + `"}`)
	ts.publish(ts.active(), TapEvent{Server: "a"}, big)
	ev, err := tap.Next(context.Background())
	require.NoError(t, err)
	assert.Equal(t, len(big), ev.Bytes)
	assert.LessOrEqual(t, len(ev.Message), tapFrameCap+16, "kept at most the cap")
	assert.True(t, strings.HasSuffix(string(ev.Message), `…"`), "a cut message is shown as a string that says so")
}
