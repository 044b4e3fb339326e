// Package metrics owns the daemon's Prometheus metrics: one registry of
// its own (never the global default), the counters and histograms the
// routers count into as requests end, and the gauges read from the
// daemon's status at each scrape. Labels are bounded: a server label is a
// configured name, a method label a method of the MCP spec or "other", an
// outcome or a cause one of the constants below.
//
// Counting costs no allocation once a series exists: a Server resolves
// each (method, outcome) child once and keeps it.
//
// # Goroutines
//
// None of its own. Counting runs on its callers' goroutines; Collect runs
// on the goroutine of the HTTP request that scrapes.
package metrics

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Outcomes of a request, the outcome label of mcpmux_requests_total.
const (
	OK        = "ok"        // the server's result
	Error     = "error"     // the server's error
	Timeout   = "timeout"   // request_timeout passed; cancelled upstream
	Cancelled = "cancelled" // the client cancelled it, or left with it in flight
	Failed    = "failed"    // mcpmux failed it after forwarding (the server exited, stalled, sent an invalid or oversized answer)
	Refused   = "refused"   // mcpmux answered an error without forwarding it
)

var outcomes = [...]string{OK, Error, Timeout, Cancelled, Failed, Refused}

// methods are the method label's values: the requests of the MCP spec
// (both eras, both directions); anything else is "other".
var methods = [...]string{
	"other",
	"initialize", "ping", "server/discover",
	"tools/list", "tools/call",
	"prompts/list", "prompts/get",
	"resources/list", "resources/templates/list", "resources/read",
	"resources/subscribe", "resources/unsubscribe",
	"completion/complete", "logging/setLevel",
	"tasks/get", "tasks/result", "tasks/cancel", "tasks/list",
	"subscriptions/listen",
	"sampling/createMessage", "elicitation/create", "roots/list",
}

// Restart causes, the cause label of mcpmux_restarts_total: Requested,
// StartFailed, or the reason the process ended (upstream.Reason*, or
// "unresponsive" for missed pings); any other reason counts as "other".
const (
	Requested   = "requested"    // `mcpmux restart`, a reload that changed the server
	StartFailed = "start_failed" // the process did not start
)

// causeOf is cause when it is one of the causes above, else "other".
func causeOf(cause string) string {
	switch cause {
	case Requested, StartFailed, "exited", "junk_output", "stalled", "stdout_closed", "stdin_closed", "killed", "unresponsive":
		return cause
	}
	return "other"
}

// Outcomes of a server's request for a client (sampling, elicitation),
// the outcome label of mcpmux_server_requests_total.
const (
	Routed            = "routed"             // sent to the session it was attributed to
	Answered          = "answered"           // that session answered
	NoClient          = "no_client"          // no session could take it
	MissingCapability = "missing_capability" // the request that caused it did not declare the capability
	ClientGone        = "client_gone"        // the session left before it answered
	ClientTimeout     = "client_timeout"     // the session did not answer in time
)

// Registry is the daemon's metrics. The zero value is not usable; New.
type Registry struct {
	reg        *prometheus.Registry
	index      map[string]int // methods, by name
	requests   *prometheus.CounterVec
	duration   *prometheus.HistogramVec
	restarts   *prometheus.CounterVec
	serverReqs *prometheus.CounterVec

	mu      sync.Mutex
	servers map[string]*Server
}

// New returns a registry with mcpmux's metrics and the Go runtime's and
// the process's.
func New() *Registry {
	r := &Registry{reg: prometheus.NewRegistry(), index: map[string]int{}, servers: map[string]*Server{}}
	for i, m := range methods {
		r.index[m] = i
	}
	r.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcpmux_requests_total",
		Help: "Requests of the sessions, by server, method and outcome (ok, error, timeout, cancelled, failed, refused).",
	}, []string{"server", "method", "outcome"})
	r.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "mcpmux_request_duration_seconds",
		Help:    "Time from a forwarded request's arrival to its end, by server and method.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
	}, []string{"server", "method"})
	r.restarts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcpmux_restarts_total",
		Help: "Restarts of a server's process, by cause.",
	}, []string{"server", "cause"})
	r.serverReqs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcpmux_server_requests_total",
		Help: "Servers' requests for a client (sampling, elicitation), by how they were attributed and ended.",
	}, []string{"server", "method", "outcome"})
	r.reg.MustRegister(r.requests, r.duration, r.restarts, r.serverReqs)
	r.reg.MustRegister(runtimeCollectors()...)
	return r
}

// runtimeCollectors are the Go runtime's and the process's metrics. The
// collectors package only wraps these two constructors, and linking it
// links database/sql and its regexps too, whose package initialisation
// every mcpmux process would pay at start, `mcpmux connect` included.
func runtimeCollectors() []prometheus.Collector {
	//lint:ignore SA1019 the very constructors collectors.NewGoCollector and NewProcessCollector call, with the same options
	return []prometheus.Collector{prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{})}
}

// Handler serves the registry in the Prometheus text format.
func (r *Registry) Handler() http.Handler {
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{})
}

// Watch adds the gauges read at each scrape from gather: what the servers
// hold now.
func (r *Registry) Watch(gather func() []Snapshot) {
	r.reg.MustRegister(newGauges(gather, r.departed))
}

// Server is where one configured server counts; the same name gets the
// same Server, so that a reload keeps its counts.
func (r *Registry) Server(name string) *Server {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.servers[name]
	if s == nil {
		s = &Server{name: name, r: r}
		r.servers[name] = s
	}
	return s
}

// departed is the bytes of a server's sessions that have ended.
func (r *Registry) departed(name string) (in, out int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := r.servers[name]; s != nil {
		return s.bytesIn.Load(), s.bytesOut.Load()
	}
	return 0, 0
}

// Server counts for one configured server. Its methods are safe for
// concurrent use and nil-safe: a nil Server counts nothing.
type Server struct {
	name string
	r    *Registry

	requests [len(methods)][len(outcomes)]atomic.Pointer[prometheus.Counter]
	duration [len(methods)]atomic.Pointer[prometheus.Observer]

	bytesIn, bytesOut atomic.Int64 // of the sessions that ended
}

// method is the index in methods of a method's label: its own when the
// spec names it, else 0, "other".
func (s *Server) method(m string) int { return s.r.index[m] }

// Done counts a request that ended with outcome; started is when it
// arrived (the zero time: not observed in the histogram).
func (s *Server) Done(method, outcome string, started time.Time) {
	if s == nil {
		return
	}
	m := s.method(method)
	s.counter(m, outcomeIndex(outcome)).Inc()
	if !started.IsZero() && outcome != Refused {
		s.observer(m).Observe(time.Since(started).Seconds())
	}
}

func outcomeIndex(o string) int {
	for i, x := range outcomes {
		if x == o {
			return i
		}
	}
	return len(outcomes) - 1
}

// counter is the child of (method m, outcome o), resolved once.
func (s *Server) counter(m, o int) prometheus.Counter {
	if c := s.requests[m][o].Load(); c != nil {
		return *c
	}
	c := s.r.requests.WithLabelValues(s.name, methods[m], outcomes[o])
	s.requests[m][o].Store(&c)
	return c
}

func (s *Server) observer(m int) prometheus.Observer {
	if o := s.duration[m].Load(); o != nil {
		return *o
	}
	o := s.r.duration.WithLabelValues(s.name, methods[m])
	s.duration[m].Store(&o)
	return o
}

// Restart counts a restart of the server's process, for cause (Requested,
// StartFailed, or the reason its process ended).
func (s *Server) Restart(cause string) {
	if s == nil {
		return
	}
	s.r.restarts.WithLabelValues(s.name, causeOf(cause)).Inc()
}

// ServerRequest counts a step of a server's request for a client.
func (s *Server) ServerRequest(method, outcome string) {
	if s == nil {
		return
	}
	s.r.serverReqs.WithLabelValues(s.name, methods[s.method(method)], outcome).Inc()
}

// SessionEnded adds the bytes of a session that ended to the server's
// count, so that mcpmux_bytes_total never goes down.
func (s *Server) SessionEnded(in, out int64) {
	if s == nil {
		return
	}
	s.bytesIn.Add(in)
	s.bytesOut.Add(out)
}
