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

var (
	descInflight = prometheus.NewDesc("mcpmux_requests_in_flight", "Requests in flight at the server.", []string{"server"}, nil)
	descSessions = prometheus.NewDesc("mcpmux_sessions", "Client sessions, by transport.", []string{"server", "transport"}, nil)
	descBytes    = prometheus.NewDesc("mcpmux_bytes_total", `Bytes of the server's sessions, by direction: "up" read from clients, "down" written to them.`, []string{"server", "direction"}, nil)
	descQueue    = prometheus.NewDesc("mcpmux_queue_bytes", `Bytes waiting in a queue: "outbox", the answers queued for the server's sessions; "stdin", the messages queued for the server.`, []string{"server", "queue"}, nil)
)

// gauges is the collector of what is read at each scrape.
type gauges struct {
	gather   func() []Snapshot
	departed func(server string) (in, out int64)

	mu   sync.Mutex
	seen map[[2]string]float64 // the last bytes reported, by server and direction
}

func (g *gauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- descInflight
	ch <- descSessions
	ch <- descBytes
	ch <- descQueue
}

func (g *gauges) Collect(ch chan<- prometheus.Metric) {
	for _, s := range g.gather() {
		ch <- prometheus.MustNewConstMetric(descInflight, prometheus.GaugeValue, float64(s.Inflight), s.Server)
		for t, n := range s.Sessions {
			ch <- prometheus.MustNewConstMetric(descSessions, prometheus.GaugeValue, float64(n), s.Server, t)
		}
		in, out := g.departed(s.Server)
		ch <- prometheus.MustNewConstMetric(descBytes, prometheus.CounterValue, g.rising(s.Server, "up", in+s.BytesIn), s.Server, "up")
		ch <- prometheus.MustNewConstMetric(descBytes, prometheus.CounterValue, g.rising(s.Server, "down", out+s.BytesOut), s.Server, "down")
		ch <- prometheus.MustNewConstMetric(descQueue, prometheus.GaugeValue, float64(s.Outbox), s.Server, "outbox")
		ch <- prometheus.MustNewConstMetric(descQueue, prometheus.GaugeValue, float64(s.Stdin), s.Server, "stdin")
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
