package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/mcpmux/mcpmux/mux"
)

// errReloadOff is Reload's error for a daemon given no Config.Reload.
var errReloadOff = errors.New("this daemon cannot load its config again")

// Status is the body of GET /status.
type Status struct {
	Version    string       `json:"version"`
	Config     string       `json:"config,omitempty"` // the file it was configured from
	Pid        int          `json:"pid"`
	Uptime     string       `json:"uptime"`
	Goroutines int          `json:"goroutines"`
	HeapBytes  uint64       `json:"heap_bytes"` // live heap
	RSSBytes   uint64       `json:"rss_bytes"`  // resident set, where the system tells (Linux)
	Servers    []mux.Status `json:"servers"`
	// Endpoints are the endpoints served, by name (a daemon of an older
	// mcpmux leaves them out).
	Endpoints []EndpointStatus `json:"endpoints"`
}

// EndpointStatus is one endpoint in GET /status.
type EndpointStatus struct {
	Name     string   `json:"name"`
	Servers  []string `json:"servers"`
	Sessions int      `json:"sessions"` // client sessions now
}

// Status sums up the daemon and its servers, by name.
func (d *Daemon) Status() Status {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	st := Status{
		Version:    d.cfg.Version,
		Config:     d.cfg.ConfigFile,
		Pid:        os.Getpid(),
		Uptime:     time.Since(d.started).Round(time.Second).String(),
		Goroutines: runtime.NumGoroutine(),
		HeapBytes:  ms.HeapAlloc,
		Servers:    []mux.Status{},
		Endpoints:  []EndpointStatus{},
	}
	if d.cfg.ResidentBytes != nil {
		st.RSSBytes = d.cfg.ResidentBytes()
	}
	var dormant map[string]int
	if w := d.web.Load(); w != nil {
		dormant = w.Dormant()
	}
	for _, srv := range d.list() {
		s := srv.Status()
		s.Dormant = dormant[s.Name]
		st.Servers = append(st.Servers, s)
	}
	for _, e := range d.Endpoints() {
		st.Endpoints = append(st.Endpoints, EndpointStatus{Name: e.Name(), Servers: append([]string{}, e.Config().Servers...), Sessions: e.Sessions()})
	}
	return st
}

// controlHandler serves the control endpoint: GET /status, GET
// /servers/NAME/logs (?follow=1 keeps it open), POST /reload and POST
// /servers/NAME/restart.
func (d *Daemon) controlHandler() http.Handler {
	m := http.NewServeMux()
	m.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, d.Status())
	})
	m.HandleFunc("GET /servers/{name}/logs", d.serveLogs)
	m.HandleFunc("GET /tap", d.serveTap)
	m.HandleFunc("POST /reload", func(w http.ResponseWriter, r *http.Request) {
		res, err := d.Reload(r.Context())
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "reload refused, the running config stays: " + err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, res)
	})
	m.HandleFunc("POST /servers/{name}/restart", func(w http.ResponseWriter, r *http.Request) {
		srv, ok := d.server(r.PathValue("name"))
		if !ok {
			noServer(w, r)
			return
		}
		srv.Restart()
		writeJSON(w, http.StatusOK, map[string]string{"restarting": srv.Name()})
	})
	// GET /metrics: the Prometheus text format (metrics.go).
	m.Handle("GET /metrics", d.metrics.Handler())
	return m
}

// serveLogs writes a server's recent log lines, then, with ?follow, each
// new one until the client or the daemon goes.
func (d *Daemon) serveLogs(w http.ResponseWriter, r *http.Request) {
	srv, ok := d.server(r.PathValue("name"))
	if !ok {
		noServer(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	for _, l := range srv.Logs() {
		fmt.Fprintln(w, l)
	}
	if r.URL.Query().Get("follow") == "" {
		return
	}
	flusher, _ := w.(http.Flusher)
	if flusher != nil {
		flusher.Flush()
	}
	srv.FollowLogs(r.Context(), func(line string) error {
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
		if flusher != nil {
			flusher.Flush()
		}
		return nil
	})
}

// serveTap writes, one JSON object a line, the messages of the servers
// named in ?servers=a,b (all when none), of ?session=ID only when given,
// whole with ?full=1, until the client or the daemon goes.
func (d *Daemon) serveTap(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := mux.TapFilter{Full: q.Get("full") != ""}
	if s := q.Get("servers"); s != "" {
		f.Servers = strings.Split(s, ",")
	}
	for _, name := range f.Servers {
		if _, ok := d.server(name); !ok {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("no server named %q", name)})
			return
		}
	}
	if s := q.Get("session"); s != "" {
		id, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("session %q is not a session id", s)})
			return
		}
		f.Session = id
	}
	tap := d.taps.Attach(f)
	defer tap.Close()
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	if flusher != nil {
		flusher.Flush()
	}
	enc := json.NewEncoder(w)
	for {
		ev, err := tap.Next(r.Context())
		if err != nil || enc.Encode(ev) != nil {
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
	}
}

func noServer(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("no server named %q", r.PathValue("name"))})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// serveControl serves the control endpoint until ctx is done; requests
// still open then (log followers) end with ctx.
func serveControl(ctx context.Context, l net.Listener, h http.Handler, log *slog.Logger) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }() // waited for below, on every path
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	if srv.Shutdown(sctx) != nil {
		srv.Close()
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
