package streamable

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/outbox"
)

// A notification about the request that the server wrote just after its
// answer (both handled in one run of the server's reader: the answer held,
// the notification sent) reaches the POST before the answer that ends it;
// a frame held without wake waits for Flush.
func TestOneShotDeliversTheAnswerLast(t *testing.T) {
	var got []string
	t1 := newOneShot([]byte(`{}`), func(f outbox.Frame) { got = append(got, string(f.Data)) })
	woke := func() bool { // wake is 1-buffered: Put and Flush fill it as they return
		select {
		case <-t1.wake:
			return true
		default:
			return false
		}
	}
	require.NoError(t, t1.Put(outbox.Frame{Data: []byte(`answer`), Tag: oneShotTag, Last: true}, false))
	require.False(t, woke(), "a held frame woke the POST")
	require.NoError(t, t1.Put(outbox.Frame{Data: []byte(`progress 3`), Tag: oneShotTag}, true))
	require.True(t, woke())
	t1.deliver()
	assert.Equal(t, []string{"progress 3", "answer"}, got)

	got = nil
	require.NoError(t, t1.Put(outbox.Frame{Data: []byte(`later`), Tag: oneShotTag}, false))
	t1.Flush()
	require.True(t, woke(), "Flush woke the POST")
	t1.deliver()
	assert.Equal(t, []string{"later"}, got)
}
