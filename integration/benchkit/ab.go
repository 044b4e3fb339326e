package benchkit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ABOptions names two mcpmux binaries to compare call by call.
type ABOptions struct {
	Old, New   string // the two mcpmux binaries; both required
	Echoserver string // prebuilt integration/bench/echoserver; empty: built
	Calls      int    // paired calls per path and round; 0: 20,000 (Short: 200)
	Rounds     int    // 0: 3
	Short      bool
	Progress   io.Writer
}

// The paths an A/B run measures.
var abPaths = []string{PathSocket, PathConnect, PathWS}

// ABRow is one path in one round: the median latency of each binary's
// calls, and the median of the paired differences (new minus old).
type ABRow struct {
	Path     string
	Round    int
	Old, New time.Duration
	Diff     time.Duration
}

// Ratio is the median paired difference as a share of the old binary's
// median: 0.05 is 5 % slower.
func (r ABRow) Ratio() float64 { return float64(r.Diff) / float64(r.Old) }

// ABReport is what AB measured.
type ABReport struct {
	Old, New      string
	Calls, Rounds int
	Rows          []ABRow
}

// Summary is the report as a table, a row per path and round.
func (r *ABReport) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "A/B: old %s, new %s; %d paired calls per path and round, interleaved call by call\n\n", r.Old, r.New, r.Calls)
	fmt.Fprintf(&b, "| path | round | old p50 | new p50 | median of new-old | as share of old p50 |\n|---|---|---|---|---|---|\n")
	for _, row := range r.Rows {
		fmt.Fprintf(&b, "| %s | %d | %.1f µs | %.1f µs | %+.1f µs | %+.1f %% |\n", row.Path, row.Round,
			micros(row.Old), micros(row.New), micros(row.Diff), 100*row.Ratio())
	}
	return b.String()
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// AB runs two daemons side by side, one per binary, each serving the Go
// echo server, and times echo calls over the socket, connect and WebSocket
// paths, alternating between the binaries call by call (and which goes
// first), so that a machine that is slower for a while slows both alike.
func AB(ctx context.Context, o ABOptions) (rep *ABReport, err error) {
	if o.Old == "" || o.New == "" {
		return nil, errors.New("ABOptions: both Old and New must name an mcpmux binary")
	}
	if o.Calls == 0 {
		o.Calls = 20000
		if o.Short {
			o.Calls = 200
		}
	}
	if o.Rounds == 0 {
		o.Rounds = 3
	}
	r := &run{ctx: ctx, progress: o.Progress, start: time.Now(), o: Options{Echoserver: o.Echoserver}}
	if r.progress == nil {
		r.progress = io.Discard
	}
	if r.dir, err = os.MkdirTemp("", "mxab"); err != nil {
		return nil, err
	}
	defer os.RemoveAll(r.dir)
	if r.o.Echoserver == "" {
		if r.o.Echoserver, err = goBuild(ctx, r.dir, "github.com/mcpmux/mcpmux/integration/bench/echoserver", false); err != nil {
			return nil, err
		}
	}
	r.track.init()
	stop := context.AfterFunc(ctx, r.track.closeAll)
	defer func() {
		if !stop() {
			<-r.track.done
		}
		if err == nil {
			err = context.Cause(ctx)
		}
	}()

	echo := serverConf{name: "echo", argv: []string{r.o.Echoserver}}
	var daemons [2]*daemon
	for i, bin := range []string{o.Old, o.New} {
		d, err := startDaemon(ctx, filepath.Join(r.dir, fmt.Sprint(i)), bin, 16, echo)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", bin, err)
		}
		defer func() { err = errors.Join(err, d.stop()) }()
		daemons[i] = d
	}
	rep = &ABReport{Old: o.Old, New: o.New, Calls: o.Calls, Rounds: o.Rounds}
	for round := 1; round <= o.Rounds; round++ {
		for _, path := range abPaths {
			row, err := r.abPath(path, round, o, daemons)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			r.logf("%s, round %d: old %.1f µs, new %.1f µs, median difference %+.1f µs (%+.1f %%)",
				path, round, micros(row.Old), micros(row.New), micros(row.Diff), 100*row.Ratio())
			rep.Rows = append(rep.Rows, row)
		}
	}
	return rep, nil
}

// abPath opens one session per binary over path and times o.Calls pairs.
func (r *run) abPath(path string, round int, o ABOptions, daemons [2]*daemon) (row ABRow, err error) {
	bins := [2]string{o.Old, o.New}
	var clients []*client
	defer func() { err = errors.Join(err, closeAll(clients)) }()
	for i, d := range daemons {
		c, err := r.dial(abOpen(path, bins[i], d))
		if err != nil {
			return row, err
		}
		clients = append(clients, c)
		if err := warm(c, 200); err != nil {
			return row, err
		}
	}
	// New minus old: the new binary's session is the first of the two.
	p50, diff, err := pairedEchoes([2]*client{clients[1], clients[0]}, o.Calls)
	if err != nil {
		return row, err
	}
	return ABRow{Path: path, Round: round, Old: p50[1], New: p50[0], Diff: diff}, nil
}

// pairedEchoes makes n pairs of echo calls, one over each of cs, which of
// the two goes first alternating, so that a machine that is slower for a
// while slows both alike. It returns the median round trip of each and the
// median of the paired differences, cs[0]'s minus cs[1]'s.
func pairedEchoes(cs [2]*client, n int) (p50 [2]time.Duration, diff time.Duration, err error) {
	lat := [2][]time.Duration{make([]time.Duration, 0, n), make([]time.Duration, 0, n)}
	diffs := make([]time.Duration, 0, n)
	for k := range n {
		var pair [2]time.Duration
		for j := range 2 {
			i := (k + j) % 2 // who goes first alternates
			t0 := time.Now()
			if err := cs[i].echo(); err != nil {
				return p50, 0, fmt.Errorf("echo: %w", err)
			}
			pair[i] = time.Since(t0)
		}
		lat[0], lat[1] = append(lat[0], pair[0]), append(lat[1], pair[1])
		diffs = append(diffs, pair[0]-pair[1])
	}
	return [2]time.Duration{median(lat[0]), median(lat[1])}, median(diffs), nil
}

// abOpen is how a session of bin's daemon d is opened over path.
func abOpen(path, bin string, d *daemon) func() (conn, error) {
	switch path {
	case PathSocket:
		return func() (conn, error) { return dialUnix(d.socket("echo")) }
	case PathConnect:
		return func() (conn, error) {
			p, err := spawn([]string{bin, "connect", "--config", d.config, "--no-autostart", "echo"}, raceEnv(), nil)
			if err != nil {
				return nil, err
			}
			return procConn(p, 10*time.Second), nil
		}
	default:
		return func() (conn, error) { return dialWS(d.wsURL("echo")) }
	}
}
