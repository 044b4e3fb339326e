package daemon

import (
	"github.com/mcpmux/mcpmux/metrics"
)

// watch makes the daemon's metrics: the routers count into them as
// requests end (each server's mux.Config.Metrics), and what the servers
// hold now is read from their status at each scrape of GET /metrics.
func (d *Daemon) watch() {
	d.metrics = metrics.New()
	d.metrics.Watch(d.snapshots)
}

// snapshots is what each server holds now, for the metrics' gauges.
func (d *Daemon) snapshots() []metrics.Snapshot {
	servers := d.list()
	out := make([]metrics.Snapshot, 0, len(servers))
	for _, srv := range servers {
		st := srv.Status()
		s := metrics.Snapshot{Server: st.Name, Inflight: st.Inflight, Stdin: int64(st.Queued),
			Sessions: map[string]int{"unix": 0, "yamux": 0, "websocket": 0, "http": 0}} // each transport, 0 too
		for _, ss := range st.SessionList {
			s.Sessions[ss.Transport]++
			s.BytesIn += ss.BytesIn
			s.BytesOut += ss.BytesOut
			s.Outbox += int64(ss.Queued)
		}
		out = append(out, s)
	}
	return out
}
