package socket

import (
	"encoding/binary"
	"errors"
	"net"
	"sync/atomic"
	"time"
)

// ErrControlFlood: a yamux client sent more control frames than
// YamuxConfig allows; its connection was closed.
var ErrControlFlood = errors.New("socket: yamux control frame flood")

// The defaults of YamuxConfig's control frame budget.
const (
	DefaultControlBurst = 100 // control frames at once
	DefaultControlRate  = 10  // control frames a second, sustained
)

// yamux frame layout (github.com/hashicorp/yamux spec.md): a 12-byte header
// of version, type, flags, stream id and length; only data frames carry a
// body, of length bytes.
const (
	yamuxHeaderSize  = 12
	yamuxData        = 0
	yamuxWindow      = 1
	yamuxPing        = 2
	yamuxGoAway      = 3
	yamuxFlagsOffset = 2
	yamuxLenOffset   = 8
)

// controlGuard is the client's side of a yamux connection as the yamux
// library reads it, with every frame header looked at first. Frames that
// only cost the daemon work (pings, which the library answers each from a
// goroutine of its own that may wait 10 s to send; go-aways; window updates
// and data frames that carry nothing) are counted against a token bucket;
// a client that empties it gets its connection closed before the library
// sees the frame that overdrew it. Frames that open, close or feed a
// stream, or carry data, are not counted: their cost is bounded elsewhere
// (max_streams_per_conn, the stream windows).
type controlGuard struct {
	net.Conn
	burst, rate float64

	tokens  float64
	last    time.Time
	flooded atomic.Bool // the budget ran out: the connection is being closed

	hdr  [yamuxHeaderSize]byte
	hn   int    // header bytes seen of the frame being read
	body uint32 // data bytes still to come of the frame being read
}

func newControlGuard(c net.Conn, burst, rate int) *controlGuard {
	return &controlGuard{Conn: c, burst: float64(burst), rate: float64(rate), tokens: float64(burst), last: time.Now()}
}

// Read implements net.Conn. Only the yamux library's receive loop calls it.
func (g *controlGuard) Read(p []byte) (int, error) {
	n, err := g.Conn.Read(p)
	if n > 0 && !g.scan(p[:n]) {
		g.flooded.Store(true)
		return 0, ErrControlFlood
	}
	return n, err
}

// scan follows the frames in p; false means the budget ran out.
func (g *controlGuard) scan(p []byte) bool {
	for len(p) > 0 {
		if g.body > 0 {
			k := uint32(min(uint64(len(p)), uint64(g.body)))
			p, g.body = p[k:], g.body-k
			continue
		}
		k := copy(g.hdr[g.hn:], p)
		p, g.hn = p[k:], g.hn+k
		if g.hn < yamuxHeaderSize {
			return true
		}
		g.hn = 0
		flags := binary.BigEndian.Uint16(g.hdr[yamuxFlagsOffset:])
		length := binary.BigEndian.Uint32(g.hdr[yamuxLenOffset:])
		control := false
		switch g.hdr[1] {
		case yamuxData:
			g.body = length
			control = length == 0 && flags == 0
		case yamuxWindow:
			control = length == 0 && flags == 0
		case yamuxPing, yamuxGoAway:
			control = true
		}
		if control && !g.take() {
			return false
		}
	}
	return true
}

// take spends one token, refilling the bucket for the time since the last.
func (g *controlGuard) take() bool {
	now := time.Now()
	g.tokens = min(g.burst, g.tokens+now.Sub(g.last).Seconds()*g.rate)
	g.last = now
	if g.tokens < 1 {
		return false
	}
	g.tokens--
	return true
}
