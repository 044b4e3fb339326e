package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Snapshot is what one server holds at a scrape, from the daemon's status.
type Snapshot struct {
	Server   string
	Inflight int            // requests in flight at the server
	Sessions map[string]int // sessions, by transport
	BytesIn  int64          // read from its live sessions
	BytesOut int64          // written to its live sessions
	Outbox   int64          // bytes queued for its sessions
	Stdin    int64          // bytes queued for the server's stdin
}

// gauges is the collector of what is read at each scrape.
type gauges struct {
	gather   func() []Snapshot
	departed func(server string) (in, out int64)

	inflight, sessions, bytes, queue *prometheus.Desc

	mu   sync.Mutex
	seen map[[2]string]float64 // the last bytes reported, by server and direction
}

func newGauges(gather func() []Snapshot, departed func(string) (int64, int64)) *gauges {
	return &gauges{
		gather:   gather,
		departed: departed,
		inflight: prometheus.NewDesc("mcpmux_requests_in_flight", "Requests in flight at the server.", []string{"server"}, nil),
		sessions: prometheus.NewDesc("mcpmux_sessions", "Client sessions, by transport.", []string{"server", "transport"}, nil),
		bytes:    prometheus.NewDesc("mcpmux_bytes_total", `Bytes of the server's sessions, by direction: "up" read from clients, "down" written to them.`, []string{"server", "direction"}, nil),
		queue:    prometheus.NewDesc("mcpmux_queue_bytes", `Bytes waiting in a queue: "outbox", the answers queued for the server's sessions; "stdin", the messages queued for the server.`, []string{"server", "queue"}, nil),
	}
}

func (g *gauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- g.inflight
	ch <- g.sessions
	ch <- g.bytes
	ch <- g.queue
}

func (g *gauges) Collect(ch chan<- prometheus.Metric) {
	for _, s := range g.gather() {
		ch <- prometheus.MustNewConstMetric(g.inflight, prometheus.GaugeValue, float64(s.Inflight), s.Server)
		for t, n := range s.Sessions {
			ch <- prometheus.MustNewConstMetric(g.sessions, prometheus.GaugeValue, float64(n), s.Server, t)
		}
		in, out := g.departed(s.Server)
		ch <- prometheus.MustNewConstMetric(g.bytes, prometheus.CounterValue, g.rising(s.Server, "up", in+s.BytesIn), s.Server, "up")
		ch <- prometheus.MustNewConstMetric(g.bytes, prometheus.CounterValue, g.rising(s.Server, "down", out+s.BytesOut), s.Server, "down")
		ch <- prometheus.MustNewConstMetric(g.queue, prometheus.GaugeValue, float64(s.Outbox), s.Server, "outbox")
		ch <- prometheus.MustNewConstMetric(g.queue, prometheus.GaugeValue, float64(s.Stdin), s.Server, "stdin")
	}
}

// rising keeps a count from going down: a session that ends leaves the
// status a moment before its bytes join the departed ones.
func (g *gauges) rising(server, dir string, n int64) float64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.seen == nil {
		g.seen = map[[2]string]float64{}
	}
	k := [2]string{server, dir}
	v := max(g.seen[k], float64(n))
	g.seen[k] = v
	return v
}
