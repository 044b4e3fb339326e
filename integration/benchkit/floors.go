package benchkit

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The rows measured against a floor interleaved in one client (issue 32):
// each mcpmux path against the floor it is judged by. Besides the paths of
// Paths, these.
const (
	PathConnectOwn     = "mcpmux connect, the bridge alone"
	PathEndpoint       = "mcpmux connect, endpoint all"
	PathSessionless    = "http 2026-07-28 sessionless POST"
	PathSessionlessNew = "http 2026-07-28 sessionless POST, modern server"
	PathModernSocket   = "modern session, modern server (unix)"
	PathModernOnLegacy = "modern session, legacy server (unix)"
	PathLegacyOnModern = "legacy session, modern server (unix)"
)

// PathBridgeSocket is the floor of PathConnectOwn: the byte bridge in
// front of the daemon's socket, so that the two differ by the bridge alone.
const PathBridgeSocket = "byte bridge + mcpmux unix socket"

const (
	serverModern    = "echo26" // the Go echo server, configured protocol = "modern"
	floorDirectName = "direct stdio (for the large results)"
)

// FloorPaths lists the rows measured against a floor, in order.
func FloorPaths() []string {
	return []string{PathSocket, PathConnect, PathWS, PathHTTP, PathConnectOwn, PathEndpoint, PathSessionless, PathSessionlessNew,
		PathModernSocket, PathModernOnLegacy, PathLegacyOnModern}
}

// FloorRound is one round of one row: the path and its floor, each over
// a session of its own, called alternately from one client (which of the
// two goes first alternates too), so that a spell of a slower machine
// falls on both alike.
type FloorRound struct {
	P50, FloorP50 time.Duration // medians of the sequential echoes
	P50Diff       time.Duration // median of the paired differences, path minus floor
	CPS, FloorCPS float64       // pipelined calls/s, bursts of each in turn

	// The large result (HugeSizes[1]), in triples with direct stdio; zero
	// where the row has none.
	Huge, FloorHuge time.Duration // medians
	HugeDiff        time.Duration // median of paired differences, path minus floor
	HugeAdded       time.Duration // median of paired differences, path minus direct
	FloorHugeAdded  time.Duration // floor minus direct
}

// FloorRow is one path against its floor, in rounds.
type FloorRow struct {
	Path, Floor string
	Huge        bool // the large result was measured
	Rounds      []FloorRound
}

// Spread is the median and range of a figure over the rounds.
type Spread struct{ Med, Min, Max float64 }

func spreadOf(v []float64) Spread {
	if len(v) == 0 {
		return Spread{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return Spread{Med: s[len(s)/2], Min: s[0], Max: s[len(s)-1]}
}

// of is the spread of f over the rounds.
func (f FloorRow) of(fn func(FloorRound) float64) Spread {
	v := make([]float64, len(f.Rounds))
	for i, r := range f.Rounds {
		v[i] = fn(r)
	}
	return spreadOf(v)
}

// P50Ratio is the path's echo p50 over its floor's, per round.
func (f FloorRow) P50Ratio() Spread {
	return f.of(func(r FloorRound) float64 { return ratioOf(float64(r.P50), float64(r.FloorP50)) })
}

// CPSRatio is the path's pipelined calls/s over its floor's, per round.
func (f FloorRow) CPSRatio() Spread {
	return f.of(func(r FloorRound) float64 { return ratioOf(r.CPS, r.FloorCPS) })
}

// HugeDiffs is the time the path adds to a large result over its floor
// (median of the paired differences), in nanoseconds, per round.
func (f FloorRow) HugeDiffs() Spread {
	return f.of(func(r FloorRound) float64 { return float64(r.HugeDiff) })
}

func ratioOf(a, b float64) float64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	return a / b
}

// Floor returns the row of path, or nil.
func (r *Report) Floor(path string) *FloorRow {
	for i := range r.Floors {
		if r.Floors[i].Path == path {
			return &r.Floors[i]
		}
	}
	return nil
}

// side is one session of a row: how it is opened, and as what client.
type side struct {
	open   func() (conn, error)
	tool   string // the echo tool's name; "": echo
	modern bool
}

// floorPair is a row to measure: the path and its floor.
type floorPair struct {
	path, floor string
	a, b        side
	huge        bool
}

// floorSetup is what the rows reach: a daemon running the Go echo server
// twice (legacy, and as serverModern with protocol = "modern"), the byte
// relay, and the HTTP relay.
type floorSetup struct {
	d         *daemon
	relaySock string
	httpRelay string
}

// floorPairs lists the rows, in the order they are reported.
func (r *run) floorPairs(s floorSetup, b backend) []floorPair {
	d := s.d
	unix := func(name string) func() (conn, error) {
		return func() (conn, error) { return dialUnix(d.socket(name)) }
	}
	connect := func(args ...string) func() (conn, error) {
		argv := append([]string{r.o.Mcpmux, "connect", "--config", d.config, "--no-autostart"}, args...)
		return func() (conn, error) { return spawnConn(argv, raceEnv()) }
	}
	relay := side{open: func() (conn, error) { return dialUnix(s.relaySock) }}
	http25 := side{open: func() (conn, error) { return dialHTTP(d.httpURL(b.server), token) }}
	sock := side{open: unix(b.server)}
	return []floorPair{
		{PathSocket, PathRelay, sock, relay, true},
		{PathConnect, PathBridge, side{open: connect(b.server)},
			side{open: func() (conn, error) { return spawnConn([]string{r.o.Bridge, s.relaySock}, nil) }}, true},
		{PathWS, PathRelay, side{open: func() (conn, error) { return dialWS(d.wsURL(b.server)) }}, relay, true},
		{PathHTTP, PathHTTPRelay, http25, side{open: func() (conn, error) { return dialHTTP(s.httpRelay, "") }}, true},
		{PathConnectOwn, PathBridgeSocket, side{open: connect(b.server)},
			side{open: func() (conn, error) { return spawnConn([]string{r.o.Bridge, d.socket(b.server)}, nil) }}, false},
		{PathEndpoint, PathConnect, side{open: connect(), tool: b.server + "__echo"}, side{open: connect(b.server)}, false},
		{PathSessionless, PathHTTP, side{open: func() (conn, error) { return dialHTTPModern(d.httpURL(b.server), token) }, modern: true}, http25, false},
		{PathSessionlessNew, PathHTTP, side{open: func() (conn, error) { return dialHTTPModern(d.httpURL(serverModern), token) }, modern: true}, http25, false},
		{PathModernSocket, PathSocket, side{open: unix(serverModern), modern: true}, sock, false},
		{PathModernOnLegacy, PathSocket, side{open: unix(b.server), modern: true}, sock, false},
		{PathLegacyOnModern, PathSocket, side{open: unix(serverModern)}, sock, false},
	}
}

// spawnConn starts argv and opens a session on its stdio.
func spawnConn(argv, env []string) (conn, error) {
	p, err := spawn(argv, env, nil)
	if err != nil {
		return nil, err
	}
	return procConn(p, 10*time.Second), nil
}

// floors measures every row of floorPairs against b (the Go echo server):
// its own daemon, relay and HTTP relay, every session opened and warmed
// first, then FloorRounds rounds that each visit every row in turn.
func (r *run) floors(rep *Report, b backend) (err error) {
	r.logf("interleaved rows: starting mcpmux serve with %s, legacy and modern...", b.name)
	d, err := startDaemon(r.ctx, filepath.Join(r.dir, "f"), r.o.Mcpmux, 1024, // sessionless POSTs in flight count as sessions
		serverConf{name: b.server, argv: b.argv}, serverConf{name: serverModern, argv: b.argv, protocol: "modern"})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, d.stop()) }()
	rl, err := startRelay(r.ctx, r.o.Relay, filepath.Join(r.dir, "rf.sock"), b.argv)
	if err != nil {
		return err
	}
	defer rl.stop()
	hr, err := startHTTPRelay(r.ctx, r.o.HTTPRelay, b.argv)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, hr.stop()) }()
	pairs := r.floorPairs(floorSetup{d: d, relaySock: rl.path, httpRelay: hr.url}, b)
	var clients []*client
	defer func() { err = errors.Join(err, closeAll(clients)) }()
	direct, err := r.openSide(side{open: func() (conn, error) { return spawnConn(b.argv, nil) }}, floorDirectName)
	if err != nil {
		return err
	}
	clients = append(clients, direct)
	sessions := make([][2]*client, len(pairs))
	for i, p := range pairs {
		for k, sd := range []side{p.a, p.b} {
			c, err := r.openSide(sd, []string{p.path, p.floor}[k])
			if err != nil {
				return err
			}
			clients = append(clients, c)
			sessions[i][k] = c
		}
		rep.Floors = append(rep.Floors, FloorRow{Path: p.path, Floor: p.floor, Huge: p.huge})
	}
	if err := r.warmHuge(pairs, sessions, direct); err != nil {
		return err
	}
	return r.floorRounds(rep, pairs, sessions, direct)
}

// warmHuge asks every session of a row with large results, and direct
// stdio, for one, untimed: it sizes the buffers on the way.
func (r *run) warmHuge(pairs []floorPair, sessions [][2]*client, direct *client) error {
	if _, _, err := hugeResults(direct, r.n.HugeSizes[1], 1); err != nil {
		return fmt.Errorf("%s: %w", floorDirectName, err)
	}
	for i, p := range pairs {
		for k, c := range sessions[i] {
			if !p.huge {
				continue
			}
			if _, _, err := hugeResults(c, r.n.HugeSizes[1], 1); err != nil {
				return fmt.Errorf("%s: large result: %w", []string{p.path, p.floor}[k], err)
			}
		}
	}
	return nil
}

// openSide opens and warms one session of a row.
func (r *run) openSide(s side, name string) (*client, error) {
	c, err := r.dial(s.open)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	c.tool, c.modern = s.tool, s.modern
	if err := warm(c, r.n.FloorWarm); err != nil {
		return c, fmt.Errorf("%s: %w", name, errors.Join(err, c.Close()))
	}
	return c, nil
}

// floorRounds measures every row, round after round.
func (r *run) floorRounds(rep *Report, pairs []floorPair, sessions [][2]*client, direct *client) error {
	for round := 1; round <= r.n.FloorRounds; round++ {
		for i, p := range pairs {
			fr, err := r.floorRound(sessions[i], direct, p.huge)
			if err != nil {
				return fmt.Errorf("%s against %s, round %d: %w", p.path, p.floor, round, err)
			}
			r.logf("round %d: %s / %s: p50 %.2f×, calls/s %.2f×, large result %s", round, p.path, p.floor,
				ratioOf(float64(fr.P50), float64(fr.FloorP50)), ratioOf(fr.CPS, fr.FloorCPS), plusDur(fr.HugeDiff))
			rep.Floors[i].Rounds = append(rep.Floors[i].Rounds, fr)
		}
	}
	return nil
}

// floorRound is one round of one row: sequential echoes in pairs, then
// pipelined bursts in turn, then (huge) large results in triples with
// direct stdio.
func (r *run) floorRound(cs [2]*client, direct *client, huge bool) (fr FloorRound, err error) {
	p50, diff, err := pairedEchoes(cs, r.n.FloorEcho)
	if err != nil {
		return fr, err
	}
	fr.P50, fr.FloorP50, fr.P50Diff = p50[0], p50[1], diff
	var spent [2]time.Duration
	for n := range r.n.FloorBursts {
		for k := range 2 {
			i := (n + k) % 2
			d, err := pipelined(cs[i], r.n.FloorBurst, r.n.InFlight)
			if err != nil {
				return fr, fmt.Errorf("pipelined: %w", err)
			}
			spent[i] += d
		}
	}
	calls := float64(r.n.FloorBursts * r.n.FloorBurst)
	fr.CPS, fr.FloorCPS = calls/spent[0].Seconds(), calls/spent[1].Seconds()
	if huge {
		err = r.floorHuge(cs, direct, &fr)
	}
	return fr, err
}

// floorHuge times large results in triples (the path, its floor and direct
// stdio, the order rotating), FloorHuge of them.
func (r *run) floorHuge(cs [2]*client, direct *client, fr *FloorRound) error {
	trio := [3]*client{cs[0], cs[1], direct}
	var times [3][]time.Duration
	var diff, added, floorAdded []time.Duration
	for n := range r.n.FloorHuge {
		var t [3]time.Duration
		for k := range 3 {
			i := (n + k) % 3
			d, _, err := hugeResults(trio[i], r.n.HugeSizes[1], 1)
			if err != nil {
				return fmt.Errorf("large result: %w", err)
			}
			t[i] = d
			times[i] = append(times[i], d)
		}
		diff, added, floorAdded = append(diff, t[0]-t[1]), append(added, t[0]-t[2]), append(floorAdded, t[1]-t[2])
	}
	fr.Huge, fr.FloorHuge = median(times[0]), median(times[1])
	fr.HugeDiff, fr.HugeAdded, fr.FloorHugeAdded = median(diff), median(added), median(floorAdded)
	return nil
}

// plusDur is a signed difference of times.
func plusDur(d time.Duration) string {
	if d >= 0 {
		return "+" + dur(d)
	}
	return dur(d)
}

// spreadRatio writes a ratio's median and range.
func spreadRatio(s Spread) string {
	if s.Med <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f× (%.2f–%.2f)", s.Med, s.Min, s.Max)
}

// spreadDur writes a difference of times' median and range.
func spreadDur(s Spread) string {
	return fmt.Sprintf("%s (%s … %s)", plusDur(time.Duration(s.Med)), plusDur(time.Duration(s.Min)), plusDur(time.Duration(s.Max)))
}

// FloorsTable is every row against its floor: the medians over the rounds
// of each side's figures, and the median and range over the rounds of the
// ratios and of the time a large result adds.
func (r *Report) FloorsTable() string {
	var b strings.Builder
	b.WriteString("| path | floor | echo p50, path / floor (paired difference) | p50 ratio (range) | calls/s, path / floor | calls/s ratio (range) |")
	fmt.Fprintf(&b, " %s result over direct, path / floor | %s result, path − floor (range) |\n", mb(r.Counts.HugeSizes[1]), mb(r.Counts.HugeSizes[1]))
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|\n")
	for _, f := range r.Floors {
		if len(f.Rounds) == 0 {
			continue
		}
		p50 := f.of(func(x FloorRound) float64 { return float64(x.P50) })
		fp50 := f.of(func(x FloorRound) float64 { return float64(x.FloorP50) })
		cps := f.of(func(x FloorRound) float64 { return x.CPS })
		fcps := f.of(func(x FloorRound) float64 { return x.FloorCPS })
		diff := f.of(func(x FloorRound) float64 { return float64(x.P50Diff) })
		fmt.Fprintf(&b, "| %s | %s | %s / %s (%s) | %s | %.0f / %.0f | %s |", f.Path, f.Floor,
			dur(time.Duration(p50.Med)), dur(time.Duration(fp50.Med)), plusDur(time.Duration(diff.Med)),
			spreadRatio(f.P50Ratio()), cps.Med, fcps.Med, spreadRatio(f.CPSRatio()))
		if !f.Huge {
			b.WriteString(" | |\n")
			continue
		}
		added := f.of(func(x FloorRound) float64 { return float64(x.HugeAdded) })
		fadded := f.of(func(x FloorRound) float64 { return float64(x.FloorHugeAdded) })
		fmt.Fprintf(&b, " %s / %s | %s |\n", plusDur(time.Duration(added.Med)), plusDur(time.Duration(fadded.Med)), spreadDur(f.HugeDiffs()))
	}
	return b.String()
}
