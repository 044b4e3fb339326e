package mux

import (
	"time"

	"github.com/mcpmux/mcpmux/idmap"
	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/metrics"
)

// What the hub counts (Config.Metrics), at the few points a request's life
// ends: an answer delivered (deliverWith), a request settled unanswered
// (client.settle), refused without forwarding (client.fail), left in
// flight by a departed session (detach). Each is one call into
// metrics.Server, which allocates nothing once its series exist.

// answerOutcome is how a request delivered with frame ended: the server's
// answer (ans) says ok or error; an answer mcpmux made (ans nil) is a
// timeout or a failure by its data.reason, or ok when it is a result (a
// bridge's answer for a parked request).
func answerOutcome(ans *jsonrpc.Message, frame []byte) string {
	switch {
	case ans != nil && ans.Kind == jsonrpc.KindResult:
		return metrics.OK
	case ans != nil:
		return metrics.Error
	}
	span, ok := jsonrpc.FindPath(frame, "error", "data", "reason")
	switch {
	case !ok:
		if _, isErr := jsonrpc.FindPath(frame, "error"); isErr {
			return metrics.Failed
		}
		return metrics.OK
	case string(frame[span.Start:span.End]) == `"`+jsonrpc.ReasonTimeout+`"`:
		return metrics.Timeout
	}
	return metrics.Failed
}

// countDone counts the end of a forwarded request.
func (c *client) countDone(r idmap.Route, outcome string) {
	c.h.cfg.Metrics.Done(r.Method, outcome, r.Started)
}

// countRefused counts a request mcpmux answered with an error without
// forwarding it: the one the session's read goroutine is handling.
func (c *client) countRefused() {
	c.h.cfg.Metrics.Done(c.asking, metrics.Refused, time.Time{})
}

// countDeparted counts what a departed session leaves: its bytes, and the
// requests it left in flight, cancelled.
func (c *client) countDeparted(routes map[int64]idmap.Route) {
	m := c.h.cfg.Metrics
	if m == nil {
		return
	}
	st := c.sess.Stats()
	m.SessionEnded(st.BytesIn, st.BytesOut)
	for _, r := range routes {
		m.Done(r.Method, metrics.Cancelled, r.Started)
	}
}
