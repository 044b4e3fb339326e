package daemon

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/mcpmux/mcpmux/mux"
	"github.com/mcpmux/mcpmux/upstream"
)

// ReloadResult says what a reload did; it is the body of POST /reload.
type ReloadResult struct {
	Added     []string `json:"added"`
	Removed   []string `json:"removed"`
	Restarted []string `json:"restarted"`          // changed how it starts: restarted, sessions kept
	Replaced  []string `json:"replaced"`           // changed otherwise: a new router, sessions closed
	Retooled  []string `json:"retooled,omitempty"` // changed its tool view (allow_tools, deny_tools) alone: applied, sessions kept and told
	Ignored   []string `json:"ignored,omitempty"`
}

// Summary is what `mcpmux reload` prints: a line for each kind of change,
// the changes that wait for a restart, or "no server changed".
func (r ReloadResult) Summary() string {
	var b strings.Builder
	for _, l := range []struct {
		what  string
		names []string
	}{{"added", r.Added}, {"removed", r.Removed}, {"restarted", r.Restarted}, {"replaced", r.Replaced}, {"tool view changed", r.Retooled}} {
		if len(l.names) > 0 {
			fmt.Fprintf(&b, "%s: %s\n", l.what, strings.Join(l.names, ", "))
		}
	}
	if len(r.Ignored) > 0 {
		fmt.Fprintf(&b, "not applied until the daemon restarts: %s\n", strings.Join(r.Ignored, ", "))
	}
	if len(r.Added)+len(r.Removed)+len(r.Restarted)+len(r.Replaced)+len(r.Retooled) == 0 {
		b.WriteString("no server changed\n")
	}
	return b.String()
}

// Reload loads the configuration again with Config.Reload and applies its
// servers: the added start, the removed stop, those changed only in how
// their process starts restart with their sessions kept, the otherwise
// changed are replaced (their sessions closed), and the untouched see
// nothing. A configuration that does not load changes nothing. It waits
// for Run's goroutine, which applies every reload, or for ctx.
func (d *Daemon) Reload(ctx context.Context) (ReloadResult, error) {
	if !d.ran.Load() {
		return ReloadResult{}, ErrNotRunning
	}
	call := reloadCall{reply: make(chan reloadReply, 1)}
	select {
	case d.reloads <- call:
	case <-d.done:
		return ReloadResult{}, ErrNotRunning
	case <-ctx.Done():
		return ReloadResult{}, context.Cause(ctx)
	}
	r := <-call.reply // Run's goroutine always answers a call it took
	return r.res, r.err
}

// takeReloads applies reloads until ctx is done. The servers a reload
// starts belong to ctx, not to the request that asked for the reload.
func (d *Daemon) takeReloads(ctx context.Context) {
	for {
		select {
		case call := <-d.reloads:
			res, err := d.reload(ctx)
			call.reply <- reloadReply{res, err}
		case <-ctx.Done():
			return
		}
	}
}

func (d *Daemon) reload(ctx context.Context) (ReloadResult, error) {
	var res ReloadResult
	if d.cfg.Reload == nil {
		return res, errReloadOff
	}
	next, err := d.cfg.Reload()
	if err == nil {
		err = validServers(next.Servers)
	}
	if err == nil {
		err = validEndpoints(next.Endpoints, next.Servers)
	}
	if err != nil {
		d.log.Error("reload refused: the config does not load; the running one stays", "error", err)
		return res, err
	}
	res.Ignored = next.Ignored
	plan := d.plan(next.Servers)
	res.Removed, res.Restarted, res.Replaced, res.Retooled = plan.removed, names(plan.restarted), plan.replaced, names(plan.retooled)
	// Never nil, even when nothing goes: take(nil) takes every server.
	going := append(append([]string{}, plan.removed...), plan.replaced...)
	for _, s := range d.take(going) {
		if slices.Contains(plan.removed, s.given.Name()) {
			d.log.Info("reload: server removed; closing its sessions", "server", s.given.Name())
		} else {
			d.log.Info("reload: server changed beyond how it starts; replacing it and closing its sessions", "server", s.given.Name())
		}
		s.stop()
	}
	d.dropEndpoints(next.Endpoints) // before a server may take a socket one of them had
	d.applyChanges(plan)
	for _, s := range plan.start {
		sv, err := d.listen(s)
		if err != nil {
			d.log.Error("reload: cannot serve a server", "server", s.Name(), "error", err)
			return res, err
		}
		d.start(ctx, sv)
		if !slices.Contains(plan.replaced, s.Name()) {
			d.log.Info("reload: server added", "server", s.Name())
			res.Added = append(res.Added, s.Name())
		}
	}
	if err := d.applyEndpoints(ctx, next); err != nil {
		return res, err
	}
	for _, l := range [][]string{res.Added, res.Removed, res.Restarted, res.Replaced, res.Retooled} {
		slices.Sort(l)
	}
	d.log.Info("reloaded", "added", res.Added, "removed", res.Removed, "restarted", res.Restarted, "replaced", res.Replaced, "retooled", res.Retooled, "ignored", res.Ignored)
	return res, nil
}

// applyChanges gives the servers that keep their router their new
// configuration: a new tool view at once, a new way to start by a restart.
func (d *Daemon) applyChanges(plan reloadPlan) {
	for _, c := range plan.retooled {
		d.log.Info("reload: server's tool view changed; applying it, sessions kept", "server", c.to.Name())
		c.s.given = c.to
		c.s.srv.SetTools(c.to.Hub.Tools)
	}
	for _, c := range plan.restarted {
		d.log.Info("reload: server changed; restarting it, sessions kept", "server", c.to.Name())
		c.s.given = c.to
		c.s.srv.SetTools(c.to.Hub.Tools)
		c.s.srv.Reconfigure(c.to.Hub.Upstream)
	}
}

// dropEndpoints stops the endpoints that are not among next.
func (d *Daemon) dropEndpoints(next []Endpoint) {
	gone := d.takeEndpoints(func(e *servedEndpoint) bool {
		return slices.ContainsFunc(next, func(n Endpoint) bool { return n.Name() == e.ep.Name() })
	})
	for _, e := range gone {
		d.log.Info("reload: endpoint removed; closing its sessions", "endpoint", e.ep.Name())
		e.stop()
	}
}

// applyEndpoints starts the endpoints of next that are not served, and
// gives those that changed their new configuration, for their sessions to
// come (those open keep theirs).
func (d *Daemon) applyEndpoints(ctx context.Context, next Reloaded) error {
	served := d.servedEndpoints()
	for _, e := range next.Endpoints {
		s, ok := served[e.Name()]
		switch {
		case !ok:
			se, err := d.listenEndpoint(e, next.Servers)
			if err != nil {
				d.log.Error("reload: cannot serve an endpoint", "endpoint", e.Name(), "error", err)
				return err
			}
			d.startEndpoint(ctx, se)
			d.log.Info("reload: endpoint added", "endpoint", e.Name())
		case !reflect.DeepEqual(s.given, e):
			s.given = e
			s.ep.Reconfigure(endpointConfig(e, next.Servers))
			d.log.Info("reload: endpoint changed; its new sessions see the change", "endpoint", e.Name(), "servers", e.Endpoint.Servers)
		}
	}
	return nil
}

// servedEndpoints are the endpoints served now, by name.
func (d *Daemon) servedEndpoints() map[string]*servedEndpoint {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]*servedEndpoint, len(d.endpoints))
	for _, e := range d.endpoints {
		out[e.ep.Name()] = e
	}
	return out
}

// reloadPlan is the difference between the servers served and the servers
// wanted.
type reloadPlan struct {
	removed   []string
	replaced  []string
	restarted []change
	retooled  []change
	start     []Server // new, and the replacements, in the order configured
}

type change struct {
	s  *served
	to Server
}

func names(cs []change) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.to.Name())
	}
	return out
}

// plan compares the served servers with want. Run's goroutine alone
// changes the served set, so it holds until the plan is applied.
func (d *Daemon) plan(want []Server) reloadPlan {
	byName := make(map[string]Server, len(want))
	for _, s := range want {
		byName[s.Name()] = s
	}
	var p reloadPlan
	d.mu.Lock()
	defer d.mu.Unlock()
	for name, s := range d.servers {
		to, keep := byName[name]
		switch {
		case !keep:
			p.removed = append(p.removed, name)
		case reflect.DeepEqual(to, s.given):
		case onlyTheToolView(s.given, to):
			p.retooled = append(p.retooled, change{s, to})
		case onlyHowItStarts(s.given, to):
			p.restarted = append(p.restarted, change{s, to})
		default:
			p.replaced = append(p.replaced, name)
		}
	}
	for _, s := range want {
		if _, ok := d.servers[s.Name()]; !ok || slices.Contains(p.replaced, s.Name()) {
			p.start = append(p.start, s)
		}
	}
	return p
}

// onlyHowItStarts reports whether two servers differ only in how their
// process starts (command, arguments, environment, folder, stderr, graces,
// output limits), which a restart of the process applies with the sessions
// kept. The message size limit is not among them: the sessions' readers
// were made with it.
//
// The router's memory of the server follows from how it starts, so it is
// not compared either: a restarted server keeps what was learned of it.
//
// The tool view is not compared either: it is applied to the running
// router (SetTools), with or without a restart.
func onlyHowItStarts(a, b Server) bool {
	a.Hub.Upstream = upstream.Config{MaxMessageBytes: a.Hub.Upstream.MaxMessageBytes}
	b.Hub.Upstream = upstream.Config{MaxMessageBytes: b.Hub.Upstream.MaxMessageBytes}
	a.Hub.Memory, b.Hub.Memory = nil, nil
	return onlyTheToolView(a, b)
}

// onlyTheToolView reports whether two servers differ only in their tool
// view (allow_tools, deny_tools), or not at all.
func onlyTheToolView(a, b Server) bool {
	a.Hub.Tools, b.Hub.Tools = mux.ToolView{}, mux.ToolView{}
	return reflect.DeepEqual(a, b)
}
